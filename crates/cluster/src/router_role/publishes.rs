//! Publishing at the router role: every publish — a gateway's run of `Publish` and
//! `PublishBatch` calls, a back-end's `myriad.pub.<subject>`, a turn of the publish
//! port, a shard's forwarded followers, an ordered batch's part — ends in ONE call
//! into the hub, [`RouterRole::publish_and_queue`], with what varies as data
//! ([`hub::Publish`]: the messages and whom each reaches).
//!
//! A run of calls is one hub publish: one durable commit for the whole run instead
//! of a store round trip per call (the router role handles one message at a time
//! on its runtime thread, so without this its groups would hold a single publish
//! each). One router reaches the followers from its own index; with
//! `--router-shards` the subjects' shard divides them (`super::forward`).

use super::forward::PublishCall;
use super::RouterRole;
use crate::timing::unix_ns;
use bus::Reply;
use bytes::Bytes;
use hub::{Handout, Publish, Published};

impl RouterRole {
    /// Publishes `calls` in order and answers each: one router at once, shards once
    /// every shard they forwarded to has counted.
    pub(super) fn publish_calls(&mut self, calls: Vec<PublishCall>) {
        if self.shards.count > 1 {
            return self.publish_sharded(calls);
        }
        let (to, items): (Vec<_>, Vec<_>) = calls.into_iter().map(|c| (c.to, c.items)).unzip();
        for (to, reply) in to.into_iter().zip(self.publish_here(items)) {
            self.answer(to, reply);
        }
    }

    /// One router: publishes every call's messages to their followers in order as
    /// one hub publish, queues the deliveries and returns each call's answer.
    pub(super) fn publish_here(&mut self, calls: Vec<Vec<(u64, Bytes)>>) -> Vec<Reply> {
        let sizes: Vec<usize> = calls.iter().map(Vec::len).collect();
        let publish = Publish::to_followers(calls.into_iter().flatten());
        let published = self.publish_and_queue(publish, unix_ns());
        let mut counts = &published.counts[..];
        sizes
            .into_iter()
            .map(|n| {
                let (call, rest) = counts.split_at(n);
                counts = rest;
                published.reply_for(call)
            })
            .collect()
    }

    /// Publishes `publish` through the hub and queues its deliveries for the
    /// gateways, each after what that gateway is already owed.
    pub(super) fn publish_and_queue(&mut self, publish: Publish, published_ns: u64) -> Published {
        let mut batches = Vec::new();
        let hub = self.hub.clone();
        let deliver = &mut |loop_id, batch| batches.push((loop_id, batch));
        let published = hub
            .publish(publish, Handout::Now(deliver))
            .expect("a publish handed out now is answered now");
        self.queue_deliveries(batches, published_ns);
        published
    }
}
