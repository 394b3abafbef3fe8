//! Names the git commit in `myriad --version` (`0.1.0 (3f2a9c1)`), or `unknown` when the
//! source is not a git checkout (a tarball, `cargo install` from a copy) or git is missing.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!(
        "cargo:rustc-env=MYRIAD_VERSION={} ({commit})",
        std::env::var("CARGO_PKG_VERSION").unwrap_or_default()
    );
    // Rebuild when HEAD moves: HEAD itself (a checkout), the branch it points to (a
    // commit), and packed-refs (where the branch may live). `--git-path` finds them in
    // a worktree too, where `.git` is a file pointing elsewhere.
    let mut watch = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch.push(branch);
    }
    for name in watch {
        if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
            let path = PathBuf::from(path);
            // Relative paths are relative to this crate's directory, where git ran.
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
