//! `POST /subscribe` and `/unsubscribe` between the streams of one HTTP/2 connection
//! (docs/protocol.md "HTTP/2: subscribe on an open connection"): the pump carries a
//! POST's control to the stream its `session=` names, and the answer back. The
//! cores decide (`connection::stream_control`, `channels::control`); this module
//! only knows which streams share a connection.
//!
//! What a core leaves for another stream (a stream's name, a POST's control, the
//! answers of a join) is taken from the outbox when its call is settled
//! ([`EventLoop::h2_take_relays`]) and carried at the round's safe points
//! ([`EventLoop::run_relays`], with the resumes), never inside another core's call.
//!
//! Budget: a name or a waiting POST lives in its stream's [`H2Stream`] entry (a box,
//! only on streams that have one); an HTTP/1.1 connection's slot and core carry
//! nothing for this.
//!
//! [`H2Stream`]: super::h2::H2Stream

use super::h2::{H2Layer, NONE};
use super::EventLoop;
use connection::ControlAnswer;
use wire::StreamControl;

/// What a stream is to the controls of its connection.
pub(super) enum Role {
    /// A subscription that said `session=<name>`: POSTs naming it act on it. A
    /// newer stream of the connection with the same name takes the name.
    Named(Box<str>),
    /// A POST whose control went to stream `target` (an id) and waits for its join
    /// on `channel` to be answered.
    Waiting { target: u32, channel: Box<str> },
}

/// Work for another stream, keyed by the token of the stream that it came from or
/// is for.
pub(super) enum Relay {
    /// The stream is named (its subscription's `session=`).
    Name(Box<str>),
    /// The POST asks the stream its control names.
    Ask(Box<StreamControl>),
    /// The stream's join was answered: for the oldest POST waiting for it.
    Answer(ControlAnswer),
    /// The POST's answer.
    Tell(ControlAnswer),
}

impl H2Layer {
    /// The stream of connection `parent` at slot `index`.
    fn stream_at(&mut self, parent: usize, index: usize) -> Option<&mut super::h2::H2Stream> {
        let conn = self.conns.get_mut(parent)?.as_deref_mut()?;
        conn.streams.iter_mut().find(|s| s.slot == index as u32)
    }

    /// POSTs of connection `parent` that wait for a stream no longer there: their
    /// slots and channels (their waits end here).
    pub(super) fn orphans(&mut self, parent: usize) -> Vec<(u32, Box<str>)> {
        let Some(conn) = self.conns.get_mut(parent).and_then(|c| c.as_deref_mut()) else {
            return Vec::new();
        };
        let mut orphans = Vec::new();
        for i in 0..conn.streams.len() {
            let Some(Role::Waiting { target, .. }) = conn.streams[i].control.as_deref() else {
                continue;
            };
            let target = *target;
            if conn.streams.iter().any(|s| s.id == target) {
                continue;
            }
            let post = &mut conn.streams[i];
            if let Some(Role::Waiting { channel, .. }) = post.control.take().map(|r| *r) {
                orphans.push((post.slot, channel));
            }
        }
        orphans
    }
}

impl EventLoop {
    /// What the core of slot `index` left for other streams, queued for
    /// [`EventLoop::run_relays`] (taken from every call: a loop without HTTP/2 has
    /// none, no core there is multiplexed).
    pub(super) fn h2_take_relays(&mut self, index: usize) {
        let session = self.outbox.take_session();
        let control = self.outbox.take_control();
        let mut answers = Vec::new();
        self.outbox.take_answers(&mut answers);
        if session.is_none() && control.is_none() && answers.is_empty() {
            return;
        }
        let token = self.conns.token(index);
        let Some(h2) = self.h2.as_mut() else {
            return;
        };
        h2.relays.extend(session.map(|s| (token, Relay::Name(s))));
        h2.relays.extend(control.map(|c| (token, Relay::Ask(c))));
        h2.relays
            .extend(answers.into_iter().map(|a| (token, Relay::Answer(a))));
    }

    /// Carries the queued relays, and those they cause, in order.
    pub(super) fn run_relays(&mut self) {
        loop {
            let Some(h2) = self.h2.as_mut() else {
                return;
            };
            if h2.relays.is_empty() {
                return;
            }
            let relays = std::mem::take(&mut h2.relays);
            for (token, relay) in relays {
                let Some(index) = self.conns.live(token) else {
                    continue; // the stream is gone (a POST's wait ended with it)
                };
                match relay {
                    Relay::Name(name) => self.h2_name(index, name),
                    Relay::Ask(control) => self.h2_ask(index, &control),
                    Relay::Answer(answer) => self.h2_answer(index, answer),
                    Relay::Tell(answer) => self.h2_tell(index, &answer),
                }
            }
        }
    }

    /// Stream `index` takes `name` (from any other stream of its connection).
    fn h2_name(&mut self, index: usize, name: Box<str>) {
        let Some(h2) = self.h2.as_mut() else {
            return;
        };
        let Some(parent) = h2.parent_of(index) else {
            return;
        };
        if let Some(conn) = h2.conns[parent].as_deref_mut() {
            for s in conn.streams.iter_mut() {
                if matches!(s.control.as_deref(), Some(Role::Named(n)) if *n == name) {
                    s.control = None;
                }
            }
        }
        if let Some(stream) = h2.stream_at(parent, index) {
            stream.control = Some(Box::new(Role::Named(name)));
        }
    }

    /// POST `post` asks the stream its control names: answered now, or it waits
    /// for that stream's join.
    fn h2_ask(&mut self, post: usize, control: &StreamControl) {
        let Some(h2) = self.h2.as_mut() else {
            return;
        };
        let target = h2.parent_of(post).and_then(|parent| {
            let conn = h2.conns[parent].as_deref()?;
            let named = |s: &&super::h2::H2Stream| {
                s.slot != NONE
                    && matches!(s.control.as_deref(), Some(Role::Named(n)) if **n == *control.session)
            };
            let s = conn.streams.iter().find(named)?;
            Some((parent, s.id, s.slot as usize))
        });
        let Some((parent, id, slot)) = target else {
            return self.h2_tell(post, &ControlAnswer::no_stream(&control.channel));
        };
        let mut answer = None;
        self.with_core(slot, |conn, cx| answer = conn.handle_control(cx, control));
        match answer {
            Some(answer) => self.h2_tell(post, &answer),
            None => {
                let waiting = self.h2.as_mut().and_then(|h| h.stream_at(parent, post));
                if let Some(stream) = waiting {
                    stream.control = Some(Box::new(Role::Waiting {
                        target: id,
                        channel: control.channel.as_str().into(),
                    }));
                }
            }
        }
    }

    /// Stream `index`'s join was answered: the oldest POST of its connection
    /// waiting for it and that channel gets the answer.
    fn h2_answer(&mut self, index: usize, answer: ControlAnswer) {
        let Some(h2) = self.h2.as_mut() else {
            return;
        };
        let Some(parent) = h2.parent_of(index) else {
            return;
        };
        let Some(id) = h2.stream_at(parent, index).map(|s| s.id) else {
            return;
        };
        let Some(conn) = h2.conns[parent].as_deref_mut() else {
            return;
        };
        let waits = |s: &&mut super::h2::H2Stream| {
            matches!(s.control.as_deref(), Some(Role::Waiting { target, channel })
                if *target == id && **channel == *answer.channel)
        };
        let Some(post) = conn.streams.iter_mut().filter(waits).min_by_key(|s| s.id) else {
            return; // the POST went (reset, or timed out)
        };
        post.control = None;
        let slot = post.slot as usize;
        self.h2_tell(slot, &answer);
    }

    /// POST `post` is answered.
    fn h2_tell(&mut self, post: usize, answer: &ControlAnswer) {
        self.with_core(post, |conn, cx| conn.handle_control_answer(cx, answer));
    }

    /// A stream of connection `parent` went: POSTs that waited for it are told it
    /// is gone (404), at the next relay pass.
    pub(super) fn h2_orphans(&mut self, parent: usize) {
        let Some(h2) = self.h2.as_mut() else {
            return;
        };
        let orphans = h2.orphans(parent);
        for (slot, channel) in orphans {
            let token = self.conns.token(slot as usize);
            let answer = ControlAnswer::no_stream(&channel);
            if let Some(h2) = self.h2.as_mut() {
                h2.relays.push((token, Relay::Tell(answer)));
            }
        }
    }
}
