//! The router's table of gateways: joining (a seat each, presence asked for), silence,
//! a restart in a dead gateway's place, the router's own reconnect (presence asked
//! again), and forgetting (every connection of the gateway logged out).

use super::RouterRole;
use crate::codec::{self, GatewayId, GatewayItem, ToGateway};
use crate::loop_id::{loops_of, MAX_GATEWAYS};
use crate::subjects;
use crate::timing::{GATEWAY_TIMEOUT, GATEWAY_TIMEOUT_ALONE, STALL};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

pub(super) struct Gateway {
    pub(super) seat: u16,
    /// The supervisor's number for it, once a heartbeat said.
    pub(super) place: Option<u32>,
    pub(super) subject: String,
    pub(super) last_seen: Instant,
    /// Replies and deliveries decided but not sent yet, in order: sent as one
    /// [`ToGateway::Bundle`] once the current message is handled (or at
    /// [`super::BUNDLE_BYTES`]).
    pub(super) items: Vec<GatewayItem>,
    /// Rough encoded size of `items`.
    pub(super) bytes: usize,
}

/// Known gateways by id, and by seat.
#[derive(Default)]
pub(super) struct Gateways {
    pub(super) by_id: HashMap<GatewayId, Gateway>,
    pub(super) by_seat: Vec<Option<GatewayId>>,
    /// When silence was last checked ([`RouterRole::forget_silent`]).
    pub(super) checked: Option<Instant>,
}

impl RouterRole {
    /// The gateway's seat, registering it if new (then asking it for its presence
    /// when `ask`). `None` when every seat is taken.
    pub(super) fn known(&mut self, gateway: GatewayId, ask: bool) -> Option<u16> {
        let now = Instant::now();
        if let Some(gw) = self.gateways.by_id.get_mut(&gateway) {
            gw.last_seen = now;
            return Some(gw.seat);
        }
        let seats = &mut self.gateways.by_seat;
        let seat = match seats.iter().position(Option::is_none) {
            Some(free) => free,
            None if seats.len() < MAX_GATEWAYS => {
                seats.push(None);
                seats.len() - 1
            }
            None => {
                tracing::error!(max = MAX_GATEWAYS, "too many gateways: one ignored");
                return None;
            }
        };
        seats[seat] = Some(gateway);
        let subject = subjects::gateway(gateway);
        tracing::info!(gateway = format!("{gateway:016x}"), seat, "gateway joined");
        if ask {
            let resync = ToGateway::Resync {
                router: self.instance,
            };
            self.out
                .push((subject.clone(), codec::encode_to_gateway(&resync)));
        }
        self.gateways.by_id.insert(
            gateway,
            Gateway {
                seat: seat as u16,
                place: None,
                subject,
                last_seen: now,
                items: Vec::new(),
                bytes: 0,
            },
        );
        self.known_count
            .store(self.gateways.by_id.len(), Ordering::Relaxed);
        Some(seat as u16)
    }

    /// Forgets gateways silent for [`GATEWAY_TIMEOUT`]: logs their connections out.
    /// Right after the router's own loop stalled ([`STALL`]) nobody is: their silence
    /// counts from now, as after the router's reconnect, and so do the ages of the
    /// bundles kept to send again.
    pub(super) fn forget_silent(&mut self, now: Instant) {
        let checked = self.gateways.checked.replace(now);
        if stalled(checked, now) {
            tracing::warn!(
                stalled_ms = checked.map_or(0, |c| now.saturating_duration_since(c).as_millis()),
                gateways = self.gateways.by_id.len(),
                "router loop stalled: the gateways' silence counts from now"
            );
            for gw in self.gateways.by_id.values_mut() {
                gw.last_seen = gw.last_seen.max(now);
            }
            self.rings.restart_ages(now);
            return;
        }
        let newest = self.gateways.by_id.values().map(|gw| gw.last_seen).max();
        let silent: Vec<GatewayId> = self
            .gateways
            .by_id
            .iter()
            .filter(|(_, gw)| silent(gw.last_seen, newest, now))
            .map(|(&id, _)| id)
            .collect();
        for id in silent {
            self.forget(id, now, "gateway silent: forgotten");
        }
    }

    /// After the router's own reconnect to NATS: every gateway is asked for its
    /// presence again (logins and logouts sent while the router was away are lost),
    /// and keeps the one it had until the fresh one replaces it. What the router
    /// sends a gateway not back on NATS yet is numbered and kept
    /// ([`super::replay`]), and the gateway asks for it once it is back; a gateway
    /// that does not come back is forgotten when silent. (Forgetting them all at
    /// once, as before, made every publish until their answers miss their
    /// connections, which were then told to resume.) Their silence counts from now:
    /// the router heard nothing while it was away. What the router sent just
    /// before it lost NATS may be lost too: each gateway gets its newest bundle
    /// again ([`super::replay::Rings::newest`]) and asks for what it missed.
    pub(super) fn resync_all(&mut self, now: Instant) {
        for gw in self.gateways.by_id.values_mut() {
            gw.last_seen = now;
        }
        tracing::warn!(
            gateways = self.gateways.by_id.len(),
            "router reconnected to NATS: every gateway asked for its presence again"
        );
        let resync = ToGateway::Resync {
            router: self.instance,
        };
        self.out.push((
            subjects::GATEWAYS.to_string(),
            codec::encode_to_gateway(&resync),
        ));
        for (gateway, bundle) in self.rings.newest() {
            self.out.push((subjects::gateway(gateway), bundle));
        }
    }

    /// `gateway` runs in the supervisor's `place`: another gateway known in that place
    /// died (the supervisor restarts a place only after its gateway's death), so its
    /// connections are logged out now rather than after [`GATEWAY_TIMEOUT`] — until
    /// then every publish would count them, and send to them, in vain.
    pub(super) fn take_place(&mut self, gateway: GatewayId, place: u32) {
        let before: Vec<GatewayId> = self
            .gateways
            .by_id
            .iter()
            .filter(|(&id, gw)| id != gateway && gw.place == Some(place))
            .map(|(&id, _)| id)
            .collect();
        for id in before {
            self.forget(
                id,
                Instant::now(),
                "gateway restarted in its place: the dead one forgotten",
            );
        }
        if let Some(gw) = self.gateways.by_id.get_mut(&gateway) {
            gw.place = Some(place);
        }
    }

    /// Logs a gateway's connections out and frees its seat.
    pub(super) fn forget(&mut self, id: GatewayId, now: Instant, why: &'static str) {
        let removed = self.gateways.by_id.remove(&id);
        self.known_count
            .store(self.gateways.by_id.len(), Ordering::Relaxed);
        if let Some(gw) = removed {
            self.gateways.by_seat[usize::from(gw.seat)] = None;
            let dropped = self.hub.logout_loops(loops_of(gw.seat), now);
            tracing::warn!(gateway = format!("{id:016x}"), dropped, "{why}");
        }
    }
}

/// Whether the router's previous silence check, at `checked`, was longer than
/// [`STALL`] before `now`.
pub(super) fn stalled(checked: Option<Instant>, now: Instant) -> bool {
    checked.is_some_and(|c| now.saturating_duration_since(c) > STALL)
}

/// Whether a gateway last heard at `last_seen` is gone. Silence counts against the
/// newest message heard from any gateway, not the clock alone: a router that falls
/// behind (a backlog of login batches on a loaded machine, measured at 600k
/// connections by `bench c1m`) has every gateway's heartbeat still queued, and
/// forgetting them all would log out every connection.
pub(super) fn silent(last_seen: Instant, newest: Option<Instant>, now: Instant) -> bool {
    let behind_others =
        newest.is_some_and(|n| n.saturating_duration_since(last_seen) >= GATEWAY_TIMEOUT);
    behind_others || now.saturating_duration_since(last_seen) >= GATEWAY_TIMEOUT_ALONE
}
