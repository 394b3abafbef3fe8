//! The docs stay true where a machine can check them: README starts with the two
//! commands; docs/operations.md's flag table against `myriad serve --help` and its
//! command table against `myriad --help`; the byte sizes docs/architecture.md quotes
//! against `size_of` (release layout: the workspace builds mio without debug
//! assertions); the systemd unit's flags against a real `myriad serve`; the NATS
//! permissions docs/security.md shows against `deploy/nats-authorization.conf`. Endpoints are
//! checked by `docs_endpoints.rs`, links by `docs_links.rs`; docs/scale.md's tables
//! against `scripts/capacity.py`. Failures say which line to change.

mod common;

use std::collections::BTreeMap;
use std::process::Command;

const README: &str = include_str!("../../../README.md");
const OPERATIONS: &str = include_str!("../../../docs/operations.md");
const ARCHITECTURE: &str = include_str!("../../../docs/architecture.md");
const UNIT: &str = include_str!("../../../deploy/myriad.service");
const SECURITY: &str = include_str!("../../../docs/security.md");
const SCALE: &str = include_str!("../../../docs/scale.md");
/// The NATS permissions docs/security.md's "NATS trust boundary" shows (tests/nats_trust.rs
/// runs them).
const NATS_AUTHORIZATION: &str = include_str!("../../../deploy/nats-authorization.conf");
/// The docs/operations.md section whose table lists every flag of `serve`.
const FLAG_SECTION: &str = "## Flags of `myriad serve`";
/// The docs/operations.md section whose table lists every subcommand.
const COMMAND_SECTION: &str = "## Commands";

#[test]
fn the_readme_starts_with_the_demo_and_the_test_command() {
    let block: Vec<&str> = README
        .lines()
        .skip_while(|l| !l.starts_with("```"))
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .collect();
    let commands: Vec<&str> = block
        .iter()
        .map(|l| l.split(" #").next().unwrap_or_default().trim())
        .collect();
    assert_eq!(
        commands,
        ["cargo run --release -p myriad -- demo", "./scripts/test.sh"],
        "README.md's first code block must be the two commands, in this order"
    );
    let before: Vec<&str> = README
        .lines()
        .take_while(|l| !l.starts_with("```"))
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(
        before,
        ["# myriad"],
        "nothing but the title before the two commands"
    );
}

/// `myriad ARGS` with no MYRIAD_* variable around, so help shows the built-in defaults.
fn myriad(args: &[&str]) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_myriad"));
    for (name, _) in std::env::vars().filter(|(n, _)| n.starts_with("MYRIAD_")) {
        cmd.env_remove(name);
    }
    let out = cmd.args(args).output().expect("run myriad");
    assert!(out.status.success(), "myriad {args:?} failed: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8 help")
}

/// One flag as `--help` shows it.
#[derive(Debug, Default)]
struct HelpFlag {
    heading: String,
    env: Option<String>,
    default: Option<String>,
    text: String,
}

/// Flags of a long `--help` text by name, with the heading they are listed under.
fn help_flags(help: &str) -> BTreeMap<String, HelpFlag> {
    let mut flags: BTreeMap<String, HelpFlag> = BTreeMap::new();
    let mut heading = String::new();
    let mut current: Option<String> = None;
    for line in help.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            heading = line.trim_end_matches(':').to_string();
            current = None;
            continue;
        }
        let t = line.trim_start();
        let t = t
            .split_once(", ")
            .filter(|(s, _)| s.len() == 2)
            .map_or(t, |x| x.1);
        if line.starts_with("  ") && t.starts_with("--") && line.len() - t.len() <= 6 {
            let name = t[2..]
                .split([' ', '='])
                .next()
                .unwrap_or_default()
                .to_string();
            flags.insert(
                name.clone(),
                HelpFlag {
                    heading: heading.clone(),
                    ..HelpFlag::default()
                },
            );
            current = Some(name);
            continue;
        }
        let Some(f) = current.as_ref().and_then(|n| flags.get_mut(n)) else {
            continue;
        };
        if let Some(env) = t.strip_prefix("[env: ") {
            // `[env: NAME=value]`, or `[env: NAME]` for secrets (`hide_env_values`).
            f.env = env.split(['=', ']']).next().map(String::from);
        } else if let Some(d) = t.strip_prefix("[default: ") {
            f.default = d.strip_suffix(']').map(String::from);
        } else {
            f.text.push_str(t);
            f.text.push(' ');
        }
    }
    flags
}

/// The rows of the first Markdown table after `heading` in `doc` (named `name`), cells trimmed.
fn table_after(doc: &str, name: &str, heading: &str) -> Vec<Vec<String>> {
    let start = doc
        .find(heading)
        .unwrap_or_else(|| panic!("{name} has no section {heading:?}"));
    doc[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2) // title row and the |---| row
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

fn unquote(cell: &str) -> Option<&str> {
    cell.strip_prefix('`')?.strip_suffix('`')
}

#[test]
fn every_serve_flag_is_in_the_operations_table_with_its_variable_and_default() {
    let help = help_flags(&myriad(&["serve", "--help"]));
    let own: BTreeMap<&String, &HelpFlag> = help
        .iter()
        .filter(|(name, f)| f.heading == "Options" && *name != "help")
        .collect();
    assert!(own.len() >= 10, "could not read `serve --help`: {help:?}");
    let rows = table_after(OPERATIONS, "docs/operations.md", FLAG_SECTION);
    let mut problems = Vec::new();
    let mut listed = BTreeMap::new();
    for row in &rows {
        let flag = unquote(&row[0]).and_then(|f| f.strip_prefix("--"));
        match flag {
            Some(f) if row.len() == 4 => {
                listed.insert(f.to_string(), row);
            }
            _ => problems.push(format!(
                "docs/operations.md {FLAG_SECTION}: row {row:?} is not | `--flag` | `MYRIAD_X` | default | what |"
            )),
        }
    }
    for (name, f) in &own {
        let env = f.env.as_deref().unwrap_or("-");
        let default = f
            .default
            .as_deref()
            .map_or("none".into(), |d| format!("`{d}`"));
        let Some(row) = listed.get(name.as_str()) else {
            problems.push(format!(
                "--{name} is a flag of `myriad serve --help` but has no row in docs/operations.md's \
                 table \"{FLAG_SECTION}\"; add:\n  | `--{name}` | `{env}` | {default} | {} |",
                f.text.trim().trim_end_matches('.').to_lowercase()
            ));
            continue;
        };
        if f.env.is_none() {
            problems.push(format!(
                "--{name} has no MYRIAD_* variable, but docs/operations.md promises one for every serve flag: add `env = \"MYRIAD_...\"`"
            ));
        }
        if unquote(&row[1]) != f.env.as_deref() {
            problems.push(format!(
                "--{name}: docs/operations.md's variable is {}, `serve --help` says {env}",
                row[1]
            ));
        }
        // A default the binary prints is quoted in backticks; none is free text.
        if unquote(&row[2]) != f.default.as_deref() {
            problems.push(format!(
                "--{name}: docs/operations.md's default is {}, `serve --help` says {default}",
                row[2]
            ));
        }
    }
    for name in listed.keys() {
        if !own.contains_key(name) {
            problems.push(format!(
                "docs/operations.md's table \"{FLAG_SECTION}\" lists --{name}, which `myriad serve --help` does not have: remove the row"
            ));
        }
    }
    let admin = own.get(&"admin".to_string()).expect("serve has --admin");
    if !admin.text.contains("/history") {
        problems.push(format!("--admin's help omits /history: {}", admin.text));
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

/// Subcommand names of a `--help` text's "Commands:" section (without `help`).
fn commands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .filter(|c| c != "help")
        .collect()
}

#[test]
fn the_command_table_lists_every_subcommand() {
    let real = commands(&myriad(&["--help"]));
    assert!(real.contains(&"serve".to_string()), "{real:?}");
    let mut in_readme = Vec::new();
    for row in table_after(OPERATIONS, "docs/operations.md", COMMAND_SECTION) {
        for part in row[0].split("`myriad ").skip(1) {
            let name: String = part
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            in_readme.push(name);
        }
    }
    let missing: Vec<&String> = real.iter().filter(|c| !in_readme.contains(c)).collect();
    let extra: Vec<&String> = in_readme.iter().filter(|c| !real.contains(c)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/operations.md's \"{COMMAND_SECTION}\" table: missing {missing:?} (in `myriad --help`), unknown {extra:?}"
    );
}

#[test]
fn every_subcommand_puts_the_global_flags_under_their_own_heading() {
    let mut todo: Vec<Vec<String>> = commands(&myriad(&["--help"]))
        .into_iter()
        .map(|c| vec![c])
        .collect();
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = myriad(&args);
        let flags = help_flags(&help);
        for global in ["log", "log-format", "config"] {
            let heading = flags.get(global).map(|f| f.heading.as_str());
            assert_eq!(
                heading,
                Some("Global options"),
                "`myriad {}`: --{global} should be under \"Global options:\"\n{help}",
                path.join(" ")
            );
        }
        for sub in commands(&help) {
            let mut p = path.clone();
            p.push(sub);
            todo.push(p);
        }
        seen += 1;
    }
    assert!(seen >= 11, "only {seen} subcommands checked");
}

/// The number in front of `what` (`a 40-byte slab entry`), spaces and line breaks folded.
fn quoted_bytes(what: &str) -> Option<usize> {
    let text = ARCHITECTURE
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let at = text.find(&format!("-byte {what}"))?;
    let digits: String = text[..at]
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.chars().rev().collect::<String>().parse().ok()
}

/// The size of the token the timing wheel stores, read off `Wheel::schedule`'s signature.
fn wheel_token_bytes<T>(_schedule: fn(&mut gateway::wheel::Wheel, T, u32) -> u32) -> usize {
    std::mem::size_of::<T>()
}

#[test]
fn the_byte_sizes_quoted_are_the_code_s() {
    let real = [
        (
            "slab entry",
            std::mem::size_of::<gateway::pump::slot::Slot>(),
        ),
        (
            "connection core",
            std::mem::size_of::<connection::Connection>(),
        ),
        (
            "timing-wheel entry",
            wheel_token_bytes(gateway::wheel::Wheel::schedule),
        ),
    ];
    let mut problems = Vec::new();
    let mut quoted_any = false;
    for (what, size) in real {
        match quoted_bytes(what) {
            Some(quoted) if quoted != size => problems.push(format!(
                "docs/architecture.md says a {quoted}-byte {what}; the code's is {size} bytes"
            )),
            Some(_) => quoted_any = true,
            None => {}
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        quoted_any,
        "docs/architecture.md quotes none of {real:?}: update this test"
    );
}

#[test]
fn the_systemd_unit_s_flags_start_a_server() {
    let exec = UNIT
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("deploy/myriad.service has ExecStart=");
    let words: Vec<&str> = exec.split_whitespace().collect();
    assert!(
        words[0].ends_with("/myriad") && words[1] == "serve",
        "{exec}"
    );
    let store = tempfile::tempdir().unwrap();
    let db = format!("sqlite:{}", store.path().join("myriad.db").display());
    // Same flags; addresses on free loopback ports and the store in a temporary directory.
    let mut args = vec!["serve"];
    let mut rest = words[2..].iter();
    while let Some(&flag) = rest.next() {
        let value = rest.next().copied().unwrap_or_default();
        let value = match flag {
            "--listen" | "--admin" => "127.0.0.1:0",
            "--store" => db.as_str(),
            _ => value,
        };
        args.extend([flag, value]);
    }
    let server = common::Server::start_args(&args);
    let (status, body) = server.request("GET", "/healthz", b"");
    assert_eq!((status, body.trim()), (200, "ok"), "{args:?}");
    let limit = UNIT
        .lines()
        .find_map(|l| l.strip_prefix("LimitNOFILE="))
        .and_then(|v| v.parse::<u64>().ok())
        .expect("LimitNOFILE= is a number");
    let nr_open: u64 = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .map_or(1 << 20, |t| t.trim().parse().unwrap_or(1 << 20));
    assert!(
        limit <= nr_open.max(1 << 20),
        "LimitNOFILE={limit} exceeds fs.nr_open's default"
    );
}

#[test]
fn the_nats_permissions_shown_are_those_of_deploy() {
    let block = format!("```conf\n{NATS_AUTHORIZATION}```");
    assert!(
        SECURITY.contains(&block),
        "docs/security.md's \"NATS trust boundary\" must show deploy/nats-authorization.conf as it is, \
         in a ```conf block: copy the file there"
    );
}

/// docs/scale.md's tables are what `scripts/capacity.py` computes from its inputs.
#[test]
fn the_scale_tables_are_the_capacity_model_s() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let out = Command::new("python3")
        .arg(format!("{root}/scripts/capacity.py"))
        .output()
        .expect("python3 (apt-get install python3)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tables = String::from_utf8(out.stdout).unwrap();
    assert!(
        SCALE.contains(&tables),
        "docs/scale.md: paste the output of scripts/capacity.py (the inputs changed):\n{tables}"
    );
}
