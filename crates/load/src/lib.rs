//! `load`: flood, msggen, drone/fleet, the friends graph generator and bench scenarios.
pub mod friends;
