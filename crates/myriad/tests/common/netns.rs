//! A network namespace a test makes (root and iproute2), deleted when dropped.

use std::process::{Command, Stdio};

pub struct Netns {
    pub name: String,
}

impl Netns {
    /// `None` when `ip netns add` is not possible here (needs root and iproute2).
    pub fn create(name: String) -> Option<Netns> {
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Netns { name })
    }

    /// Runs `ip ARGS`, which must succeed.
    pub fn ip(&self, args: &[&str]) {
        let status = Command::new("ip").args(args).status().expect("run ip");
        assert!(status.success(), "ip {args:?} failed");
    }
}

impl Drop for Netns {
    /// Deleting the namespace also removes a veth pair with one end inside it.
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}
