//! A `myriad flood --reconnect --json` child of a test: its per-second rows go to a
//! CSV (what arrived so far), its JSON summary comes on stdout when it is told to end.

use std::io::Read;
use std::path::PathBuf;
use std::process::Child;

pub struct Flood {
    pub child: Child,
    pub csv: PathBuf,
}

impl Flood {
    /// Messages received so far (the sum of the CSV's per-second column).
    pub fn messages(&self) -> u64 {
        let text = std::fs::read_to_string(&self.csv).unwrap_or_default();
        text.lines()
            .skip(1)
            .filter_map(|l| l.split(',').nth(4)?.parse::<u64>().ok())
            .sum()
    }

    /// SIGTERM, then the summary.
    pub fn finish(&mut self) -> serde_json::Value {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .expect("flood's stdout is piped")
            .read_to_string(&mut out)
            .unwrap();
        self.child.wait().unwrap();
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("flood's summary: {e}: {out}"))
    }
}

impl Drop for Flood {
    /// A failed assertion must not leave floods holding the test's output open.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
