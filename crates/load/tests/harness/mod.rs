//! Running a flood in a thread for tests: its message total and open count visible as
//! it goes, stopped once enough messages have arrived.

#![allow(dead_code)]

use load::flood::{self, FloodArgs, FloodSummary};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A flood running in a thread, with its message total visible as it goes.
pub struct Running {
    pub stop: Arc<AtomicBool>,
    pub messages: Arc<AtomicU64>,
    pub open: Arc<AtomicU64>,
    pub handle: std::thread::JoinHandle<anyhow::Result<FloodSummary>>,
}

pub fn start(args: FloodArgs) -> Running {
    let stop = Arc::new(AtomicBool::new(false));
    let messages = Arc::new(AtomicU64::new(0));
    let open = Arc::new(AtomicU64::new(0));
    let (s, m, o) = (stop.clone(), messages.clone(), open.clone());
    let handle = std::thread::spawn(move || {
        flood::run_until(args, &s, &mut |t| {
            m.fetch_add(t.messages, Ordering::Relaxed);
            o.store(t.open, Ordering::Relaxed);
        })
    });
    Running {
        stop,
        messages,
        open,
        handle,
    }
}

impl Running {
    /// Wait (bounded) until the per-second ticks have reported `n` messages, then stop.
    pub fn finish_after(self, n: u64) -> FloodSummary {
        let end = Instant::now() + Duration::from_secs(20);
        while self.messages.load(Ordering::Relaxed) < n && !self.handle.is_finished() {
            assert!(
                Instant::now() < end,
                "only {} of {n} messages arrived",
                self.messages.load(Ordering::Relaxed)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .join()
            .expect("flood thread")
            .expect("flood run")
    }
}
