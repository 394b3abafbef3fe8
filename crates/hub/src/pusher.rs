//! Pusher apps on the router side: each app's webhook (`--pusher-webhook ID=URL`,
//! in Pusher's format, [`crate::webhook_style`]), the `--webhook` (myriad's format,
//! or Pusher's for the first app with `--webhook-pusher-key`), and the member named
//! by a client event on a presence channel.
//!
//! A client event's envelope (`wire::pusher::Published`) reaches the router that
//! owns its channel with the sender's myriad user as `user_id` (a decimal: the
//! gateway keeps no Pusher id string). Here, under the router lock, it becomes the
//! id as the app gave it (a string id rides in the member's presence info,
//! `wire::pusher_user::read_member`), or is dropped when the publishing connection
//! is not that user's, so no client names another member; the envelope is then
//! what every subscriber and webhook sees (pusher-js hands it to the callback as
//! `metadata.user_id`, Pusher's `client_event` webhook carries it).

use crate::webhook::{PusherHook, Style, Webhook};
use crate::{Hub, HubArgs};
use anyhow::{bail, Context};
use bus::ConnRef;
use bytes::Bytes;
use wire::pusher::Published;

/// `--webhook URL` with `--webhook-secret`: myriad's format, or with
/// `--webhook-pusher-key` Pusher's for the first app (its channels, myriad's names).
pub(crate) fn webhook(url: &str, args: &HubArgs) -> anyhow::Result<Webhook> {
    let secret = args
        .webhook_secret
        .as_deref()
        .filter(|s| !s.is_empty())
        .context("--webhook needs --webhook-secret (its signature's key)")?;
    let style = match &args.webhook_pusher_key {
        None => Style::myriad(secret),
        Some(key) => {
            let app = auth::PusherApp::parse(&format!("webhook:{key}:{secret}"))
                .map_err(|_| anyhow::anyhow!("--webhook-pusher-key {key}: a key without ':'"))?;
            Style::Pusher(PusherHook {
                app,
                namespace: String::new(),
            })
        }
    };
    Webhook::start(url, style).context("--webhook")
}

/// One `--pusher-webhook` value: `ID=URL`.
fn parse_hook(spec: &str) -> anyhow::Result<(&str, &str)> {
    match spec.split_once('=') {
        Some((id, url)) if !id.is_empty() && !url.is_empty() => Ok((id, url)),
        _ => bail!("--pusher-webhook {spec}: wants ID=URL (a --pusher-app's id)"),
    }
}

impl Hub {
    /// Starts a sender for each `--pusher-webhook ID=URL`, for the app with that id
    /// among the `--pusher-app` values `apps` (a router is given them too). At
    /// most one per app, and none for the first app beside `--webhook-pusher-key`
    /// (the same hook).
    pub fn start_pusher_webhooks(&mut self, args: &HubArgs, apps: &[String]) -> anyhow::Result<()> {
        if args.pusher_webhooks.is_empty() {
            return Ok(());
        }
        let apps = auth::PusherApps::parse(apps).context("--pusher-app")?;
        for spec in &args.pusher_webhooks {
            let (id, url) = parse_hook(spec)?;
            let Some((index, app)) = apps.by_id(id) else {
                bail!(
                    "--pusher-webhook {spec}: no --pusher-app has the id {id} \
                     (a router process needs the --pusher-app flags too)"
                );
            };
            if self.pusher_webhooks.iter().any(|(i, _)| i == id) {
                bail!("--pusher-webhook: two webhooks for the app {id}");
            }
            if index == 0 && args.webhook.is_some() && args.webhook_pusher_key.is_some() {
                bail!(
                    "--pusher-webhook {id}=…: --webhook with --webhook-pusher-key is already \
                     the first app's Pusher webhook (keep one)"
                );
            }
            let hook = PusherHook {
                app: app.clone(),
                namespace: apps.namespace(index),
            };
            let webhook = Webhook::start(url, Style::Pusher(hook))
                .with_context(|| format!("--pusher-webhook {id}"))?;
            self.pusher_webhooks.push((id.to_string(), webhook));
        }
        Ok(())
    }

    /// Every webhook: the `--webhook`, then each `--pusher-webhook`.
    pub(crate) fn webhooks(&self) -> impl Iterator<Item = &Webhook> {
        self.webhook
            .iter()
            .chain(self.pusher_webhooks.iter().map(|(_, w)| w))
    }

    /// A publish on `channel` from `conn`: on a presence channel an envelope's
    /// member resolved (see the module doc; one `conn` does not hold is dropped,
    /// whoever sent the envelope), and for a Pusher client event (an envelope
    /// naming its socket) Pusher's `client_event` webhook queued. Any other payload
    /// comes back as it is, read only when it could be one.
    pub(crate) fn pusher_client_event(
        &self,
        conn: ConnRef,
        channel: &str,
        payload: Bytes,
    ) -> Bytes {
        let presence = wire::pusher_user::shown(channel).starts_with("presence-");
        let hooked = self.webhooks().any(|w| w.style().pusher().is_some());
        if payload.first() != Some(&b'{') || !(presence || hooked) {
            return payload;
        }
        let mut p = Published::read(&payload);
        let mut payload = payload;
        // Checked whatever else the envelope says: a publish without a socket (a
        // myriad client's, a back-end's) names no member either.
        if presence && p.user_id.is_some() {
            let user = p.user_id.as_deref().and_then(wire::pusher_user::numeric);
            let shown = user.and_then(|user| {
                let router = self.router.lock();
                router
                    .is_connection_of(user, conn)
                    .then(|| wire::pusher_user::read_member(user, router.presence_info(user)).0)
            });
            if shown != p.user_id {
                p.user_id = shown;
                payload = Bytes::from(p.to_envelope());
            }
        }
        if p.socket_id.is_some() {
            for hook in self.webhooks() {
                hook.client_event(channel, &p);
            }
        }
        payload
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus::{ChannelJoin, Request};

    #[test]
    fn a_client_event_names_its_member_only_from_the_member_s_connection() {
        let hub = Hub::new(
            router::Router::new(Default::default(), router::SubscriptionIndex::new()),
            store::open("memory").unwrap(),
        );
        let alice = auth::pusher_user_key("alice");
        let join = |user, id| Request::Join {
            user: Some(user),
            login: true,
            since: None,
            epoch: None,
            channels: vec![ChannelJoin {
                name: "presence-room".into(),
                since: None,
                epoch: None,
            }],
            info: wire::pusher_user::member_info(id, None),
        };
        let (a, b) = (
            ConnRef {
                loop_id: 0,
                token: 1,
            },
            ConnRef {
                loop_id: 0,
                token: 2,
            },
        );
        hub.handle(a, join(alice, "alice"), &mut |_, _| {});
        hub.handle(b, join(7, "7"), &mut |_, _| {});
        let send = |from, channel: &str, user| {
            let payload = Published::client_event("client-x", "{}", "1.2", Some(user));
            let request = Request::PublishChannel {
                channel: channel.into(),
                payload: Bytes::from(payload),
            };
            let mut got = Vec::new();
            hub.handle(from, request, &mut |_, mail| {
                got.push(Published::read(&mail.msg.payload).user_id)
            });
            got
        };
        // Delivered to the other member; the id as the app gave it.
        assert_eq!(send(a, "presence-room", alice), [Some("alice".into())]);
        assert_eq!(send(b, "presence-room", 7), [Some("7".into())]);
        // A connection naming another member names nobody.
        assert_eq!(send(b, "presence-room", alice), [None]);
        // Nor does an envelope without a socket (not a Pusher client's event).
        let forged = br#"{"event":"client-x","data":"{}","user_id":"alice"}"#;
        let mut got = Vec::new();
        let request = Request::PublishChannel {
            channel: "presence-room".into(),
            payload: Bytes::from_static(forged),
        };
        hub.handle(b, request, &mut |_, mail| {
            got.push(Published::read(&mail.msg.payload).user_id)
        });
        assert_eq!(got, [None]);
    }

    #[test]
    fn each_app_s_webhook_is_started_once_and_counted_under_its_id() {
        let args = |hooks: &[&str], legacy: bool| {
            let mut args = crate::tests::memory_args();
            args.pusher_webhooks = hooks.iter().map(|h| h.to_string()).collect();
            if legacy {
                args.webhook = Some("http://127.0.0.1:9/".into());
                args.webhook_secret = Some("s1".into());
                args.webhook_pusher_key = Some("k1".into());
            }
            args
        };
        let apps = ["a1:k1:s1".to_string(), "a2:k2:s2".to_string()];
        let start = |hooks: &[&str], legacy| {
            let args = args(hooks, legacy);
            let mut hub = Hub::open_args(&args).unwrap();
            hub.start_pusher_webhooks(&args, &apps).map(|()| hub)
        };
        // Port 9 on loopback: nothing answers; the senders only queue.
        let hub = start(&["a2=http://127.0.0.1:9/h"], true).unwrap();
        let stats = hub.stats_json();
        assert_eq!(stats["pusher_webhooks"]["a2"]["sent_batches"], 0, "{stats}");
        assert_eq!(stats["webhook"]["dropped"], 0, "{stats}");
        for bad in [
            &["a3=http://127.0.0.1:9/"][..],
            &["a2=http://127.0.0.1:9/", "a2=http://127.0.0.1:9/"],
            &["a2=https://example.com/"],
            &["a2"],
        ] {
            assert!(start(bad, false).is_err(), "{bad:?}");
        }
        // The first app's hook twice: --webhook-pusher-key is it already.
        assert!(start(&["a1=http://127.0.0.1:9/"], true).is_err());
        assert!(start(&["a1=http://127.0.0.1:9/"], false).is_ok());
    }

    #[test]
    fn a_pusher_webhook_is_id_equals_url() {
        assert_eq!(
            parse_hook("app2=http://127.0.0.1:9/h?a=b").unwrap(),
            ("app2", "http://127.0.0.1:9/h?a=b")
        );
        for bad in ["app2", "=http://x/", "app2="] {
            assert!(parse_hook(bad).is_err(), "{bad}");
        }
    }
}
