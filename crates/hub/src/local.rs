//! [`LocalBus`]: the bus when the router lives in the gateways' own process — a
//! direct call into the [`Hub`], with deliveries pushed into the loops' mailboxes.

use crate::Hub;
use bus::{Bus, ConnRef, Inbound, Mailbox, Reply, Request};
use std::sync::Arc;

pub struct LocalBus {
    hub: Arc<Hub>,
    /// Indexed by loop id.
    mailboxes: Vec<Arc<Mailbox>>,
}

impl LocalBus {
    pub fn new(hub: Arc<Hub>, mailboxes: Vec<Arc<Mailbox>>) -> LocalBus {
        LocalBus { hub, mailboxes }
    }
}

impl Bus for LocalBus {
    /// Always answers at once. Deliveries for the caller's own loop are queued
    /// without a wake-up: that loop drains its mailbox at the end of its round, so
    /// everything published in one round leaves in one write per connection.
    fn call(&self, conn: ConnRef, request: Request) -> Option<Reply> {
        let reply = self.hub.handle(conn, request, &mut |loop_id, batch| {
            match self.mailboxes.get(loop_id as usize) {
                Some(mailbox) => mailbox.push(Inbound::Deliver(batch), loop_id == conn.loop_id),
                // A connection ref naming a loop this process does not have is a bug
                // in the caller; the message stays in history.
                None => tracing::error!(loop_id, "delivery for an unknown loop dropped"),
            }
        });
        Some(reply)
    }
}
