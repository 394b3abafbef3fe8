//! What a connection with channels keeps (a connection without channels keeps
//! nothing: `Connection::chans` is `None`, 8 bytes): [`Chans`], 4-byte words in
//! 8 bytes ([`Words`]: one word inside them, more in a block of the process's pool
//! with no allocator's header) and a byte saying whether positions are kept — per
//! stream its tag (the
//! user's place first when the connection has a user, then its channels), and, on
//! the transports that write positions back (SSE's composite id, a long-poll's
//! answer), 12 bytes more of the stream's position beside each tag. A WebSocket or
//! a chunked stream frames each message's own position and never reads a
//! stream's back, so it keeps 4 bytes a channel, not 16. A channel is a 4-byte id
//! in the process's table of held names ([`names`]), so a name is kept once
//! however many connections hold it, and a delivery finds its subscription by
//! comparing ids.

use super::words::Words;
use super::{names, REFUSED_WHY};
use bus::Refusal;
use wire::Since;

/// What a token says of channels: which the client may subscribe to (`chan`)
/// and where its `presence=1` is not honoured (`nopresence`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Access {
    pub(crate) chan: auth::ChannelGrant,
    pub(crate) no_presence: auth::ChannelGrant,
}

impl Access {
    /// The token's channel claims.
    pub(crate) fn of(grant: &auth::Grant) -> Access {
        Access {
            chan: grant.channels.clone(),
            no_presence: grant.no_presence.clone(),
        }
    }

    /// Whether the client may subscribe to `name`.
    pub(super) fn allows(&self, name: &str) -> bool {
        self.chan.allows(name)
    }

    /// Whether the client may watch `name`'s joins and leaves (its presence
    /// companion): allowed `name`, and no `nopresence` pattern names it.
    pub(super) fn watches(&self, name: &str) -> bool {
        self.chan.allows(name) && !self.no_presence.allows(name)
    }
}

/// The channels of one connection: 8 bytes, and a block of the pool past one stream. What its token
/// allows them is apart (`Credentials::access`): few connections have one.
#[derive(Debug)]
pub(crate) struct Chans {
    /// Its byte: [`PLACED`] or not; its words: each stream, [`STRIDE`] words when
    /// placed (tag, epoch, seq low, seq high) else its tag alone: the user's place
    /// (when the connection has a user), then the channels in the request's order
    /// (the order of a composite id's parts), then those a WebSocket subscribed
    /// to later. It changes only on a subscribe or leave.
    words: Words,
}

/// The byte's flag: each stream keeps its position.
const PLACED: u8 = 1;
/// Words a placed stream takes.
const STRIDE: usize = 4;

/// A tag's flags above the name id (ids stay below 2^26: each needs a held name,
/// so the table would fill memory long before).
const HAS_AT: u32 = 1 << 31;
const HAS_EPOCH: u32 = 1 << 30;
/// Refused (the token does not allow the channel, or it was left): kept only for
/// its place in a composite id, never joined.
const REFUSED: u32 = 1 << 29;
/// The user's stream, not a channel (holds no name).
const USER: u32 = 1 << 28;
/// With `REFUSED`: the router refused it, the user holding
/// `--max-subscriptions-per-user` channels already ([`Refusal::UserLimit`]).
const USER_LIMIT: u32 = 1 << 27;
/// Joined after the request (its part follows the request's in a composite id, so
/// leaving it need not keep its place).
const LATER: u32 = 1 << 26;
const ID: u32 = LATER - 1;

/// A channel's tag, its name taken into the process's table (given back by
/// [`Chans::remove_at`], [`Chans::replace`] or the list's drop).
fn channel_tag(name: &str, refused: bool) -> u32 {
    let id = names::hold(name);
    debug_assert!(id <= ID, "name ids stay below 2^26");
    (id & ID) | if refused { REFUSED } else { 0 }
}

fn is_user(tag: u32) -> bool {
    tag & USER != 0
}

fn is_refused(tag: u32) -> bool {
    tag & REFUSED != 0
}

/// The channel's name id (`None` for the user's stream).
fn id_of(tag: u32) -> Option<u32> {
    (!is_user(tag)).then_some(tag & ID)
}

/// A joined channel (not the user's stream, not refused) with this id.
fn is_joined(tag: u32, id: u32) -> bool {
    tag & (USER | REFUSED) == 0 && tag & ID == id
}

/// The channel's name (an empty string for the user's stream).
fn name_of(tag: u32) -> std::sync::Arc<str> {
    match id_of(tag) {
        Some(id) => names::name(id),
        None => "".into(),
    }
}

/// What a refused channel is told.
fn why(tag: u32) -> &'static str {
    match tag & USER_LIMIT != 0 {
        true => Refusal::UserLimit.text(),
        false => REFUSED_WHY,
    }
}

impl Chans {
    /// A connection's streams: the user's at `user` (`None`: no user), then
    /// `channels` (name, position, refused). `placed`: each stream keeps its
    /// position (the transport writes it back: SSE, long-poll).
    pub(super) fn new<'a>(
        placed: bool,
        user: Option<Option<Since>>,
        channels: impl IntoIterator<Item = (&'a str, Option<Since>, bool)>,
    ) -> Chans {
        let channels = channels.into_iter();
        let streams = channels.size_hint().0 + usize::from(user.is_some());
        let mut words = Vec::with_capacity(streams * stride(placed));
        let mut add = |tag: u32, at: Option<Since>| {
            let i = stream_words(&words, placed);
            words.extend(std::iter::repeat_n(0, stride(placed)));
            words[i * stride(placed)] = tag;
            set_at_in(&mut words, placed, i, at);
        };
        if let Some(at) = user {
            add(USER, at);
        }
        for (name, at, refused) in channels {
            add(channel_tag(name, refused), at);
        }
        Chans {
            words: Words::new(u8::from(placed), &words),
        }
    }

    fn placed(&self) -> bool {
        self.words.meta() & PLACED != 0
    }

    /// Streams held.
    fn streams(&self) -> usize {
        stream_words(&self.words, self.placed())
    }

    fn tag(&self, i: usize) -> u32 {
        self.words[i * stride(self.placed())]
    }

    fn tag_mut(&mut self, i: usize) -> &mut u32 {
        let s = stride(self.placed());
        &mut self.words[i * s]
    }

    fn tags(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().step_by(stride(self.placed())).copied()
    }

    /// The joined (not refused) channel `name`.
    pub(crate) fn find(&self, name: &str) -> Option<usize> {
        self.find_id(names::id(name)?)
    }

    /// The joined channel whose name id is `id` (what a delivery looks for).
    pub(super) fn find_id(&self, id: u32) -> Option<usize> {
        self.tags().position(|t| is_joined(t, id))
    }

    /// Where stream `i` stands: the last position delivered, or where the client
    /// resumed. Kept only when placed: `None` otherwise ([`Chans::has_at`] says
    /// whether there is one).
    pub(super) fn at(&self, i: usize) -> Option<Since> {
        let tag = self.tag(i);
        if !self.placed() || tag & HAS_AT == 0 {
            return None;
        }
        let b = i * STRIDE;
        let seq = u64::from(self.words[b + 2]) | u64::from(self.words[b + 3]) << 32;
        Some(Since {
            epoch: (tag & HAS_EPOCH != 0).then_some(self.words[b + 1]),
            seq,
        })
    }

    /// Whether stream `i` has a position (the client gave one, or a message or
    /// join moved it), placed or not.
    pub(super) fn has_at(&self, i: usize) -> bool {
        self.tag(i) & HAS_AT != 0
    }

    /// Moves stream `i` to `at`.
    pub(super) fn set_at(&mut self, i: usize, at: Option<Since>) {
        let placed = self.placed();
        set_at_in(&mut self.words, placed, i, at);
    }

    /// Whether stream `i` was joined after the request.
    pub(super) fn later(&self, i: usize) -> bool {
        self.tag(i) & LATER != 0
    }

    /// Adds channel `name` after the others (a later subscribe) at `at`.
    pub(super) fn push_later(&mut self, name: &str, at: Option<Since>) {
        let placed = self.placed();
        let i = self.streams();
        self.words.resize(self.words.len() + stride(placed));
        self.words[i * stride(placed)] = channel_tag(name, false) | LATER;
        set_at_in(&mut self.words, placed, i, at);
    }

    /// Moves joined channel `name` to `at` (nothing when it is not joined).
    pub(super) fn set_named_at(&mut self, name: &str, at: Option<Since>) {
        if let Some(i) = self.find(name) {
            self.set_at(i, at);
        }
    }

    /// Where channel `name` is (joined or not).
    pub(super) fn position(&self, name: &str) -> Option<usize> {
        let id = names::id(name)?;
        self.tags().position(|t| id_of(t) == Some(id))
    }

    /// Puts channel `name` (at `at`, refused or not) in the place of stream `i`,
    /// which lets go of its own name.
    pub(super) fn replace(&mut self, i: usize, name: &str, at: Option<Since>, refused: bool) {
        let tag = channel_tag(name, refused);
        if let Some(id) = id_of(self.tag(i)) {
            names::release(id);
        }
        *self.tag_mut(i) = tag;
        self.set_at(i, at);
    }

    /// Takes stream `i` out.
    pub(super) fn remove_at(&mut self, i: usize) {
        if let Some(id) = id_of(self.tag(i)) {
            names::release(id);
        }
        let s = stride(self.placed());
        self.words.remove(i * s..(i + 1) * s);
    }

    fn channels(&self) -> impl Iterator<Item = u32> + '_ {
        self.tags().filter(|&t| !is_user(t))
    }

    /// The names joined (not refused).
    pub(super) fn joined(&self) -> Vec<String> {
        self.channels()
            .filter(|&t| !is_refused(t))
            .map(|t| name_of(t).to_string())
            .collect()
    }

    /// The names refused (by the token, or by the router), each with what it is told.
    pub(super) fn refused(&self) -> Vec<(String, &'static str)> {
        self.channels()
            .filter(|&t| is_refused(t))
            .map(|t| (name_of(t).to_string(), why(t)))
            .collect()
    }

    /// The router refused joining `name` (`why`): it stays, never joined, for its
    /// place in a composite id, and is reported as a token's refusal is.
    pub(super) fn refuse(&mut self, name: &str, why: Refusal) {
        if let Some(i) = self.find(name) {
            *self.tag_mut(i) |= match why {
                Refusal::UserLimit => REFUSED | USER_LIMIT,
            };
        }
    }

    /// Whether some channel is refused.
    pub(super) fn any_refused(&self) -> bool {
        self.channels().any(is_refused)
    }

    /// How many channels count against `--max-channels-per-connection` (a
    /// channel's presence companion rides with it, the friends companion too).
    pub(super) fn len(&self) -> usize {
        self.channels()
            .filter(|&t| !is_refused(t) && !wire::channel::is_companion(&name_of(t)))
            .count()
    }

    /// The user's stream (`None` without a user).
    fn user_stream(&self) -> Option<usize> {
        (self.streams() > 0 && is_user(self.tag(0))).then_some(0)
    }

    /// The user's place (`None` without a user, before a position, or unplaced).
    pub(super) fn user_at(&self) -> Option<Since> {
        self.user_stream().and_then(|i| self.at(i))
    }

    /// Moves the user's place (nothing without a user).
    pub(super) fn set_user_at(&mut self, at: Option<Since>) {
        if let Some(i) = self.user_stream() {
            self.set_at(i, at);
        }
    }

    /// The composite position: the user's part (with a user), then each channel's.
    pub(super) fn write_composite(&self, out: &mut Vec<u8>) {
        wire::write_positions(out, (0..self.streams()).map(|i| self.at(i)));
    }
}

impl Drop for Chans {
    fn drop(&mut self) {
        for id in self.tags().filter_map(id_of).collect::<Vec<_>>() {
            names::release(id);
        }
    }
}

fn stride(placed: bool) -> usize {
    match placed {
        true => STRIDE,
        false => 1,
    }
}

/// Streams in `words`.
fn stream_words(words: &[u32], placed: bool) -> usize {
    words.len() / stride(placed)
}

/// Sets stream `i`'s position flags in its tag, and the position itself when
/// `placed`.
fn set_at_in(words: &mut [u32], placed: bool, i: usize, at: Option<Since>) {
    let b = i * stride(placed);
    words[b] &= !(HAS_AT | HAS_EPOCH);
    let Some(at) = at else {
        return;
    };
    words[b] |= HAS_AT;
    if at.epoch.is_some() {
        words[b] |= HAS_EPOCH;
    }
    if placed {
        words[b + 1] = at.epoch.unwrap_or(0);
        words[b + 2] = at.seq as u32;
        words[b + 3] = (at.seq >> 32) as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(epoch: Option<u32>, seq: u64) -> Option<Since> {
        Some(Since { epoch, seq })
    }

    #[test]
    fn a_connections_list_is_one_allocation_of_4_bytes_a_stream_16_when_placed() {
        assert_eq!(std::mem::size_of::<Option<Chans>>(), 8);
        let name = "channels-test:list";
        let channels = [(name, None, false), ("list:refused", None, true)];
        let plain = Chans::new(false, Some(None), channels);
        assert_eq!(plain.words.len(), 3);
        let mut chans = Chans::new(true, Some(None), channels);
        assert_eq!(chans.words.len(), 3 * 4);
        assert!(chans.find(name).is_some());
        assert!(chans.find("list:refused").is_none());
        assert_eq!(chans.position("list:refused"), Some(2));
        assert_eq!(chans.joined(), vec![name.to_string()]);
        assert_eq!(
            chans.refused(),
            vec![("list:refused".to_string(), REFUSED_WHY)]
        );
        assert_eq!(chans.len(), 1);
        chans.set_user_at(at(Some(5), 2));
        chans.push_later("list:later", None);
        let mut out = Vec::new();
        chans.write_composite(&mut out);
        assert_eq!(out, b"5-2___");
        let i = chans.find(name).expect("joined");
        chans.remove_at(i);
        assert!(chans.find(name).is_none());
        assert_eq!(chans.joined(), vec!["list:later".to_string()]);
        assert_eq!(chans.user_at().map(|a| a.seq), Some(2));
        let later = chans.find("list:later").expect("joined later");
        assert!(chans.later(later) && !chans.later(0));
    }

    #[test]
    fn a_place_keeps_a_position_with_or_without_an_epoch_and_its_flags() {
        let name = "channels-test:place";
        let mut chans = Chans::new(true, None, [(name, None, true)]);
        assert_eq!(chans.at(0), None);
        let id = id_of(chans.tag(0));
        chans.set_at(0, at(None, 4));
        assert_eq!(chans.at(0), at(None, 4));
        chans.set_at(0, at(Some(0), u64::MAX));
        assert_eq!(chans.at(0), at(Some(0), u64::MAX));
        assert!(is_refused(chans.tag(0)), "the refusal stays");
        assert_eq!(id_of(chans.tag(0)), id, "and the name");
        chans.set_at(0, None);
        assert_eq!(chans.at(0), None);
        assert!(!chans.has_at(0));
    }

    #[test]
    fn an_unplaced_list_knows_a_stream_has_a_position_but_keeps_none() {
        let mut chans = Chans::new(false, Some(None), [("place:plain", None, false)]);
        chans.set_at(1, at(Some(3), 9));
        chans.set_user_at(at(None, 1));
        assert!(chans.has_at(1) && chans.has_at(0));
        assert_eq!((chans.at(1), chans.user_at()), (None, None));
        chans.replace(1, "place:plain", None, true);
        assert!(!chans.has_at(1));
        assert_eq!(chans.refused().len(), 1);
    }

    #[test]
    fn a_channel_the_router_refuses_keeps_its_place_and_says_why() {
        let mut chans = Chans::new(
            true,
            None,
            [("limit-test:a", None, false), ("limit-test:b", None, true)],
        );
        chans.refuse("limit-test:a", Refusal::UserLimit);
        let pos = at(Some(1), 2);
        chans.set_at(0, pos);
        assert_eq!(chans.len(), 0, "refused channels do not count");
        assert_eq!(chans.at(0), pos);
        assert_eq!(
            chans.refused(),
            [
                ("limit-test:a".to_string(), Refusal::UserLimit.text()),
                ("limit-test:b".to_string(), REFUSED_WHY)
            ]
        );
    }

    #[test]
    fn names_are_held_while_listed_and_let_go_on_leave_and_drop() {
        let name = "list:held-once";
        let chans = Chans::new(false, None, [(name, None, false)]);
        let mut other = Chans::new(true, None, [(name, None, false)]);
        assert!(names::id(name).is_some());
        other.remove_at(0);
        assert!(names::id(name).is_some(), "the first list still holds it");
        drop(chans);
        assert!(names::id(name).is_none(), "forgotten with its last holder");
    }
}
