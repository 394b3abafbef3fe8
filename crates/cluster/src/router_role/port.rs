//! A turn of the publish port's requests (one router; shards take the port's
//! publishes over NATS): everything the port read since the router's last turn is
//! handled in this one, so its deliveries leave as one NATS message per gateway —
//! as a gateway's batch of publishes does — and, with durable history, a run of
//! single publishes shares one commit. Each answer goes back once the turn's
//! messages are out.

use super::{RouterRole, BACKEND};
use crate::publish_port::PortCall;
use bus::{Reply, Request};
use tokio::sync::{mpsc, oneshot};

/// Most of the port's requests handled in one turn (the gateways' batches and the
/// tick wait behind it).
const TURN: usize = 256;

/// Answers owed to the port, sent once the turn's messages are published.
pub(super) type Answers = Vec<(oneshot::Sender<Reply>, Reply)>;

impl RouterRole {
    /// Handles `first` and whatever else the port has queued (up to [`TURN`]).
    pub(super) fn port_turn(
        &mut self,
        first: PortCall,
        rest: &mut mpsc::UnboundedReceiver<PortCall>,
        answers: &mut Answers,
    ) {
        let mut calls = vec![first];
        while calls.len() < TURN {
            match rest.try_recv() {
                Ok(call) => calls.push(call),
                Err(_) => break,
            }
        }
        let single = |call: &PortCall| matches!(call.request, Request::Publish { .. });
        let mut calls = calls.into_iter().peekable();
        while let Some(call) = calls.next() {
            if self.hub.durable_history() && single(&call) {
                let mut run = vec![call];
                while let Some(next) = calls.next_if(single) {
                    run.push(next);
                }
                let (senders, items): (Vec<_>, Vec<_>) = run
                    .into_iter()
                    .filter_map(|call| match call.request {
                        Request::Publish { subject, payload } => {
                            Some((call.reply, (subject, payload)))
                        }
                        _ => None,
                    })
                    .unzip();
                let replies = self.publish_committed(items);
                answers.extend(senders.into_iter().zip(replies));
                continue;
            }
            let reply = self.call(BACKEND, call.request);
            answers.push((call.reply, reply));
        }
    }
}
