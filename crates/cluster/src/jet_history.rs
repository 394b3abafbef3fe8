//! `--history-store jetstream`: the router's history rings in a JetStream stream,
//! so a whole-server restart (even `kill -9`) keeps every user's messages, numbers
//! and epoch when NATS links the deployment anyway (issue 9) and no store is shared.
//!
//! One stream, [`STREAM`], subjects `myriad.history.<user>`, file storage,
//! `max_msgs_per_subject` = `--history`: the server itself keeps each user's newest
//! messages. Each kept message is one stream message, its epoch, seq and subject
//! in headers. A group commit publishes every surviving row of the group ([`net`]),
//! then awaits all the acks: one round trip per group, not per message, and the
//! group's 200s go out only after the last ack. A forgotten ring (ttl, hole) is a
//! purge of its subject (awaited before the group's publishes); a new ring needs
//! none: it is written after the old one, and the reader keeps the newest run.
//!
//! Reading back at start: one ordered consumer over the whole stream (every stored
//! message once, in stream order, no acks), rows grouped per user in that order.
//! (The alternative, a per-subject "last message" request, would be one request
//! per user and still miss all but each ring's newest message.)
//!
//! The `HistoryLog` trait is synchronous; this log has a NATS connection and a
//! small runtime of its own ([`Link`]), and each call blocks on it. That is never
//! the router role's runtime, which also calls the hub (and may lead a commit).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use async_nats::jetstream::{self, stream::StorageType};
use async_nats::HeaderMap;
use bytes::Bytes;
use futures_util::StreamExt;
use store::history::net::net;
use store::history::{HistoryChange, HistoryLog, HistoryRow};
use store::StoreError;

use nats_link::Link;

/// The stream holding every router's history.
pub const STREAM: &str = "MYRIAD_HISTORY";
/// Subject prefix; a user's messages are on `myriad.history.<user>`.
pub const SUBJECT_PREFIX: &str = "myriad.history.";
const EPOCH: &str = "Myriad-Epoch";
const SEQ: &str = "Myriad-Seq";
const SUBJECT: &str = "Myriad-Subject";
/// Bound on one group's acks (over its attempts), a purge, or the wait for the next
/// stored message.
const TIMEOUT: Duration = Duration::from_secs(10);
/// One attempt's wait for its acks. A stream whose leader dies answers nothing for
/// what was sent to it; the others elect a new one within a couple of seconds, so the
/// group is sent again then ([`MSG_ID`] makes a resend stored once) instead of holding
/// the router for the whole [`TIMEOUT`].
const ACK_TIMEOUT: Duration = Duration::from_secs(2);
/// One attempt to make the consumer that reads the stream back at start, and how
/// many are made before the start fails.
const CONSUMER_TIMEOUT: Duration = Duration::from_secs(3);
const CONSUMER_ATTEMPTS: u32 = 8;
/// JetStream's de-duplication header: a message's `<user>.<epoch>.<seq>`.
const MSG_ID: &str = "Nats-Msg-Id";

pub struct JetHistory {
    link: Link,
    js: jetstream::Context,
    stream: jetstream::stream::Stream,
}

fn config(keep: usize, replicas: u8) -> jetstream::stream::Config {
    jetstream::stream::Config {
        name: STREAM.into(),
        subjects: vec![format!("{SUBJECT_PREFIX}>")],
        max_messages_per_subject: keep.max(1) as i64,
        storage: StorageType::File,
        num_replicas: usize::from(replicas.max(1)),
        ..Default::default()
    }
}

fn remote(e: impl std::fmt::Display) -> StoreError {
    StoreError::Io(std::io::Error::other(format!("jetstream history: {e}")))
}

impl JetHistory {
    /// Connects to the NATS server `nats` names and opens (or creates) the stream with
    /// `keep` messages per user, kept in `replicas` copies on a NATS cluster
    /// (`--history-replicas`). A server without JetStream is refused with advice.
    pub fn open(
        nats: &nats_link::NatsConfig,
        keep: usize,
        replicas: u8,
    ) -> anyhow::Result<JetHistory> {
        let url = nats.shown();
        let link = Link::connect(
            nats,
            "myriad history",
            |event| tracing::info!(%event, "NATS (history)"),
        )?;
        // A context spawns its ack task: built on the link's runtime.
        let client = link.client.clone();
        let js = link.block_on(async move {
            jetstream::ContextBuilder::new()
                .timeout(TIMEOUT)
                .build(client)
        });
        let stream = {
            let (js, client) = (js.clone(), link.client.clone());
            link.block_on(async move {
                jetstream_offered(&client).await?;
                let mut stream = js
                    .get_or_create_stream(config(keep, replicas))
                    .await
                    .with_context(|| format!("cannot open the JetStream stream {STREAM}"))?;
                let made = stream.info().await?.config.clone();
                let want = config(keep, replicas);
                if made.max_messages_per_subject != want.max_messages_per_subject
                    || made.num_replicas != want.num_replicas
                {
                    // `--history` or `--history-replicas` changed since the stream was made.
                    js.update_stream(want)
                        .await
                        .with_context(|| format!("cannot update the stream {STREAM}"))?;
                }
                Ok::<_, anyhow::Error>(stream)
            })
        }
        .with_context(|| format!("--history-store jetstream at {url}"))?;
        Ok(JetHistory { link, js, stream })
    }

    /// Deletes the stream on `nats` (a benchmark's fresh start); no stream is fine.
    pub fn delete(nats: &nats_link::NatsConfig) -> anyhow::Result<()> {
        let link = Link::connect(nats, "myriad history delete", |_| {})?;
        let client = link.client.clone();
        link.block_on(async move {
            let js = jetstream::new(client);
            match js.delete_stream(STREAM).await {
                Ok(_) => Ok(()),
                Err(e) if e.to_string().contains("not found") => Ok(()),
                Err(e) => Err(anyhow::anyhow!("cannot delete the stream {STREAM}: {e}")),
            }
        })
    }
}

/// Whether the server answers the JetStream API (`$JS.API.INFO`, asked raw: the
/// client's typed account info does not parse nats-server 2.9's answer). Without
/// JetStream nobody answers (no responders) or the answer is an error.
async fn jetstream_offered(client: &async_nats::Client) -> anyhow::Result<()> {
    let refused = |why: String| {
        anyhow::anyhow!(
            "the NATS server does not offer JetStream ({why}); --history-store jetstream \
             needs one started with `nats-server -js` (or `jetstream {{}}` in its config)"
        )
    };
    let answer = client
        .request("$JS.API.INFO", Bytes::new())
        .await
        .map_err(|e| refused(e.to_string()))?;
    let doc: serde_json::Value =
        serde_json::from_slice(&answer.payload).map_err(|e| refused(e.to_string()))?;
    match doc.get("error") {
        Some(error) => Err(refused(error.to_string())),
        None => Ok(()),
    }
}

/// One row as a stream message: subject, headers, payload.
fn message(
    user: u64,
    epoch: u32,
    seq: u64,
    subject: u64,
    payload: &[u8],
) -> (String, HeaderMap, Bytes) {
    let mut headers = HeaderMap::new();
    headers.insert(MSG_ID, format!("{user}.{epoch}.{seq}"));
    headers.insert(EPOCH, epoch.to_string());
    headers.insert(SEQ, seq.to_string());
    headers.insert(SUBJECT, subject.to_string());
    (
        format!("{SUBJECT_PREFIX}{user}"),
        headers,
        Bytes::copy_from_slice(payload),
    )
}

/// A stored message back as a row.
fn row(msg: &async_nats::Message) -> Result<HistoryRow, StoreError> {
    let number = |name: &str| -> Result<u64, StoreError> {
        msg.headers
            .as_ref()
            .and_then(|h| h.get(name))
            .and_then(|v| v.as_str().parse().ok())
            .ok_or_else(|| StoreError::Corrupt(format!("{} without a {name} header", msg.subject)))
    };
    let user = msg
        .subject
        .as_str()
        .strip_prefix(SUBJECT_PREFIX)
        .and_then(|u| u.parse().ok())
        .ok_or_else(|| StoreError::Corrupt(format!("history subject {}", msg.subject)))?;
    Ok(HistoryRow {
        user,
        epoch: u32::try_from(number(EPOCH)?)
            .map_err(|_| StoreError::Corrupt(format!("{}: epoch", msg.subject)))?,
        seq: number(SEQ)?,
        subject: number(SUBJECT)?,
        payload: msg.payload.to_vec(),
    })
}

/// One attempt at a group: purges first (each its own request, all in flight
/// together: the group's publishes must not be overtaken by a purge of the same user;
/// net() leaves none such, but a later group's could be), then every message, then
/// every ack.
async fn write_group(
    js: &jetstream::Context,
    stream: &jetstream::stream::Stream,
    purges: &[String],
    messages: &[(String, HeaderMap, Bytes)],
) -> Result<(), StoreError> {
    let purged = futures_util::future::join_all(
        purges
            .iter()
            .map(|s| std::future::IntoFuture::into_future(stream.purge().filter(s.clone()))),
    )
    .await;
    for p in purged {
        p.map_err(remote)?;
    }
    let mut acks = Vec::with_capacity(messages.len());
    for (subject, headers, payload) in messages {
        acks.push(
            js.publish_with_headers(subject.clone(), headers.clone(), payload.clone())
                .await
                .map_err(remote)?,
        );
    }
    for ack in acks {
        tokio::time::timeout(ACK_TIMEOUT, ack)
            .await
            .map_err(|_| remote("no ack within 2 s"))?
            .map_err(remote)?;
    }
    Ok(())
}

impl HistoryLog for JetHistory {
    fn apply(&mut self, changes: &[HistoryChange<'_>], keep: usize) -> Result<(), StoreError> {
        let mut purges = Vec::new();
        let mut messages = Vec::new();
        for user in net(changes, keep) {
            if user.forgotten() {
                purges.push(format!("{SUBJECT_PREFIX}{}", user.user));
            }
            for r in &user.rows {
                messages.push(message(user.user, r.epoch, r.seq, r.subject, r.payload));
            }
        }
        if purges.is_empty() && messages.is_empty() {
            return Ok(());
        }
        let (js, stream) = (self.js.clone(), self.stream.clone());
        self.link.block_on(async move {
            // The whole group again after a failed attempt: a purge is the same twice,
            // a message already stored is not stored again (its id), and what a
            // leader stored before dying is a prefix of the group, so the order holds.
            let deadline = Instant::now() + TIMEOUT;
            loop {
                match write_group(&js, &stream, &purges, &messages).await {
                    Ok(()) => return Ok(()),
                    Err(e) if Instant::now() + ACK_TIMEOUT > deadline => return Err(e),
                    Err(e) => {
                        tracing::warn!(error = %e, "JetStream history write: sending the group again");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        })
    }

    fn for_each(&mut self, f: &mut dyn FnMut(HistoryRow)) -> Result<u64, StoreError> {
        let started = Instant::now();
        let stream = self.stream.clone();
        let rows = self.link.block_on(async move { read_all(stream).await })?;
        let mut n = 0;
        for (_, user_rows) in rows {
            for r in user_rows {
                f(r);
                n += 1;
            }
        }
        tracing::info!(
            messages = n,
            ms = started.elapsed().as_millis() as u64,
            "JetStream history read"
        );
        Ok(n)
    }
}

/// Every stored message, per user in stream order.
async fn read_all(
    mut stream: jetstream::stream::Stream,
) -> Result<BTreeMap<u64, Vec<HistoryRow>>, StoreError> {
    let mut out: BTreeMap<u64, Vec<HistoryRow>> = BTreeMap::new();
    let state = stream
        .info()
        .await
        .map_err(|e| remote(format!("stream info: {e}")))?
        .state
        .clone();
    if state.messages == 0 {
        return Ok(out);
    }
    // A stream that lost a node may place the reading consumer on it (nats-server
    // 2.9 picks among the stream's peers, the lost one too): that attempt never
    // answers, another one lands on a live node.
    let mut attempt = 0;
    let consumer = loop {
        attempt += 1;
        let made = tokio::time::timeout(
            CONSUMER_TIMEOUT,
            stream.create_consumer(jetstream::consumer::pull::OrderedConfig {
                deliver_policy: jetstream::consumer::DeliverPolicy::All,
                ..Default::default()
            }),
        )
        .await;
        match made {
            Ok(Ok(consumer)) => break consumer,
            Ok(Err(e)) if attempt >= CONSUMER_ATTEMPTS => {
                return Err(remote(format!("reading consumer: {e}")))
            }
            Err(_) if attempt >= CONSUMER_ATTEMPTS => {
                return Err(remote(format!(
                    "reading consumer: no answer in {CONSUMER_ATTEMPTS} attempts"
                )))
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, attempt, "JetStream history: making the reading consumer again")
            }
            Err(_) => tracing::warn!(
                attempt,
                "JetStream history: the reading consumer was not made in 3 s: again"
            ),
        }
    };
    let mut messages = consumer
        .messages()
        .await
        .map_err(|e| remote(format!("reading consumer's messages: {e}")))?;
    loop {
        let next = tokio::time::timeout(TIMEOUT, messages.next())
            .await
            .map_err(|_| remote("no stored message in 10 s while reading back"))?;
        let Some(msg) = next else {
            return Err(remote("the reading consumer ended early"));
        };
        let msg = msg.map_err(remote)?;
        let info = msg.info().map_err(remote)?;
        let (stream_seq, pending) = (info.stream_sequence, info.pending);
        let r = row(&msg.message)?;
        out.entry(r.user).or_default().push(r);
        if pending == 0 || stream_seq >= state.last_sequence {
            return Ok(out);
        }
    }
}
