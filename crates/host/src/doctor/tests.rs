//! Tests of the doctor: its checks on this machine and on given figures.

use super::*;

#[test]
fn small_targets_pass_and_huge_ones_need_changes() {
    let small = checks(100);
    assert!(small
        .iter()
        .any(|c| c.name == "nofile" && c.level == Level::Ok));
    assert!(small
        .iter()
        .any(|c| c.name == "memory" && c.level == Level::Ok));
    let huge = checks(1 << 40);
    let mem = huge
        .iter()
        .find(|c| c.name == "memory")
        .expect("memory is always checked");
    assert_eq!(mem.level, Level::Block);
    let nofile = huge
        .iter()
        .find(|c| c.name == "nofile")
        .expect("nofile is always checked");
    assert_eq!(nofile.level, Level::Warn);
    assert!(nofile.fix.iter().any(|f| f.starts_with("ulimit -n")));
    assert!(
        nofile.detail.contains("one process per"),
        "{}",
        nofile.detail
    );
    let tcp_mem = huge
        .iter()
        .find(|c| c.name == "tcp_mem")
        .expect("tcp_mem is checked on Linux");
    assert_eq!(tcp_mem.level, Level::Warn, "{tcp_mem:?}");
    assert!(tcp_mem.detail.contains("TCP buffers only"), "{tcp_mem:?}");
    let ktls = small
        .iter()
        .find(|c| c.name == "ktls")
        .expect("kTLS is always reported");
    assert_eq!(ktls.level, Level::Ok, "never blocks: {ktls:?}");
    let available = tls::ktls::probe() == tls::ktls::Availability::Available;
    assert_eq!(ktls.detail.starts_with("available"), available, "{ktls:?}");
}

/// `deploy/99-myriad.conf` is what `doctor --print-sysctl` prints, byte for byte.
#[test]
fn a_small_established_hash_is_named_with_its_chain_and_how_to_grow_it() {
    let ok = ehash_check(4_194_304, 2_000_000);
    assert_eq!(ok.level, Level::Ok, "{}", ok.detail);
    let small = ehash_check(262_144, 2_000_000);
    assert_eq!(small.level, Level::Warn);
    assert!(small.detail.contains("chain of ~8"), "{}", small.detail);
    assert!(
        small
            .fix
            .iter()
            .any(|f| f.contains("thash_entries=4194304")),
        "{:?}",
        small.fix
    );
    // Fix lines are comments: no `sysctl -w` that c1m would apply to this namespace.
    assert!(
        small.fix.iter().all(|f| f.starts_with('#')),
        "{:?}",
        small.fix
    );
    assert_eq!(ehash_for(2_000_000), 4_194_304);
    assert_eq!(ehash_for(30), 64);
    assert_eq!(ehash_for(u64::MAX / 4), MAX_CHILD_EHASH);
}

#[test]
fn the_deploy_dropin_is_what_doctor_prints() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/99-myriad.conf");
    let file = std::fs::read_to_string(path).expect("deploy/99-myriad.conf exists");
    assert_eq!(
        file,
        sysctl_dropin(),
        "deploy/99-myriad.conf differs from `myriad doctor --print-sysctl`; regenerate it: \
         myriad doctor --print-sysctl > deploy/99-myriad.conf"
    );
    for (_, key) in BACKLOG_SYSCTLS {
        assert!(
            file.contains(&format!("\n{key} = {RECOMMENDED_BACKLOG}\n")),
            "{key}"
        );
    }
}
