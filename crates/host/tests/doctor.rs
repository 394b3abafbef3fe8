//! `myriad doctor` as a library: every check is reported, and the command runs.

#[test]
fn doctor_reports_every_check() {
    let checks = host::doctor::checks(100_000);
    for name in [
        "nofile",
        "fs.file-max",
        "ip_local_port_range",
        "somaxconn",
        "tcp_max_syn_backlog",
        "tcp_mem",
        "memory",
    ] {
        assert!(checks.iter().any(|c| c.name == name), "missing {name}");
    }
    let ports = checks
        .iter()
        .find(|c| c.name == "ip_local_port_range")
        .unwrap();
    assert!(
        ports.fix.iter().any(|f| f.contains("--source 127.0.0.2-")),
        "{ports:?}"
    );
    host::doctor::run(host::doctor::DoctorArgs {
        connections: 1000,
        json: true,
        strict: false,
        print_sysctl: false,
    })
    .unwrap();
}
