//! A turn of the publish port's requests (one router; shards take the port's
//! publishes over NATS): everything the port read since the router's last turn is
//! handled in this one, so its deliveries leave as one NATS message per gateway —
//! as a gateway's batch of publishes does — and a run of publishes is one hub
//! publish (with durable history, one commit). Each answer goes back once the
//! turn's messages are out.

use super::{RouterRole, BACKEND};
use crate::publish_port::PortCall;
use bus::{Reply, Request};
use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

/// Most of the port's requests handled in one turn (the gateways' batches and the
/// tick wait behind it).
const TURN: usize = 256;

/// Answers owed to the port, sent once the turn's messages are published.
pub(super) type Answers = Vec<(oneshot::Sender<Reply>, Reply)>;

/// A run of the port's publish calls: where each answer goes, and its messages.
type Run = Vec<(oneshot::Sender<Reply>, Vec<(u64, Bytes)>)>;

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
        // A run of publishes is one hub publish; anything else ends the run.
        let mut run: Run = Vec::new();
        for call in calls {
            match call.request {
                Request::Publish { subject, payload } => {
                    run.push((call.reply, vec![(subject, payload)]));
                }
                Request::PublishBatch { items, .. } => run.push((call.reply, items)),
                request => {
                    self.publish_run(&mut run, answers);
                    answers.push((call.reply, self.call(BACKEND, request)));
                }
            }
        }
        self.publish_run(&mut run, answers);
    }

    /// Publishes the calls of `run` (emptied) and queues their answers.
    fn publish_run(&mut self, run: &mut Run, answers: &mut Answers) {
        if run.is_empty() {
            return;
        }
        let (senders, items): (Vec<_>, Vec<_>) = run.drain(..).unzip();
        answers.extend(senders.into_iter().zip(self.publish_here(items)));
    }
}
