//! What a connection with channels keeps (a connection without channels keeps
//! nothing: `Connection::chans` is `None`, 8 bytes): a boxed [`Chans`] and one
//! 16-byte [`Sub`] per stream in an exact-size array — the user's place first when
//! the connection has a user, then its channels. A channel is a 4-byte id in the
//! process's table of held names ([`names`]), so a name is kept once however many
//! connections hold it, and a delivery finds its subscription by comparing ids.

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

/// The channels of one connection: 24 bytes (a 32-byte allocation).
#[derive(Debug, Default)]
pub(crate) struct Chans {
    /// What the token allows (`None`: no JWT configured, all of it).
    pub(super) allow: Option<Box<Access>>,
    /// The user's place (when the connection has a user), then the channels in the
    /// request's order (the order of a composite id's parts), then those a WebSocket
    /// subscribed to later. Exact size: it changes only on a subscribe or leave.
    list: Box<[Sub]>,
}

/// One stream of a connection, 16 bytes: which one and flags in `tag`, the last
/// position delivered (or where the client resumed) in `epoch` and `seq`.
#[derive(Debug)]
pub(super) struct Sub {
    tag: u32,
    epoch: u32,
    seq: u64,
}

/// `tag`'s flags above the name id (ids stay below 2^26: each needs a held name,
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

impl Sub {
    /// A channel stream, its name taken into the process's table.
    pub(super) fn new(name: &str, at: Option<Since>, refused: bool) -> Sub {
        let id = names::hold(name);
        debug_assert!(id <= ID, "name ids stay below 2^26");
        let mut sub = Sub {
            tag: id & ID,
            epoch: 0,
            seq: 0,
        };
        sub.set_at(at);
        if refused {
            sub.tag |= REFUSED;
        }
        sub
    }

    /// A channel joined after the request.
    pub(super) fn new_later(name: &str, at: Option<Since>) -> Sub {
        let mut sub = Sub::new(name, at, false);
        sub.tag |= LATER;
        sub
    }

    pub(super) fn later(&self) -> bool {
        self.tag & LATER != 0
    }

    /// The user's stream.
    fn user(at: Option<Since>) -> Sub {
        let mut sub = Sub {
            tag: USER,
            epoch: 0,
            seq: 0,
        };
        sub.set_at(at);
        sub
    }

    pub(super) fn at(&self) -> Option<Since> {
        (self.tag & HAS_AT != 0).then_some(Since {
            epoch: (self.tag & HAS_EPOCH != 0).then_some(self.epoch),
            seq: self.seq,
        })
    }

    pub(super) fn set_at(&mut self, at: Option<Since>) {
        self.tag &= !(HAS_AT | HAS_EPOCH);
        if let Some(at) = at {
            self.tag |= HAS_AT;
            self.seq = at.seq;
            if let Some(e) = at.epoch {
                self.tag |= HAS_EPOCH;
                self.epoch = e;
            }
        }
    }

    pub(super) fn refused(&self) -> bool {
        self.tag & REFUSED != 0
    }

    /// What a refused channel is told.
    fn why(&self) -> &'static str {
        match self.tag & USER_LIMIT != 0 {
            true => Refusal::UserLimit.text(),
            false => REFUSED_WHY,
        }
    }

    fn is_user(&self) -> bool {
        self.tag & USER != 0
    }

    /// The channel's name id (`None` for the user's stream).
    fn id(&self) -> Option<u32> {
        (!self.is_user()).then_some(self.tag & ID)
    }

    /// A joined channel (not the user's stream, not refused) with this id.
    fn is_joined(&self, id: u32) -> bool {
        self.tag & (USER | REFUSED) == 0 && self.tag & ID == id
    }

    /// The channel's name (an empty string for the user's stream).
    pub(super) fn name(&self) -> std::sync::Arc<str> {
        match self.id() {
            Some(id) => names::name(id),
            None => "".into(),
        }
    }
}

impl Drop for Sub {
    fn drop(&mut self) {
        if let Some(id) = self.id() {
            names::release(id);
        }
    }
}

impl Chans {
    /// A connection's streams: the user's at `user` (`None`: no user), then `subs`.
    pub(super) fn new(
        allow: Option<Box<Access>>,
        user: Option<Option<Since>>,
        subs: impl IntoIterator<Item = Sub>,
    ) -> Chans {
        let list = user.map(Sub::user).into_iter().chain(subs).collect();
        Chans { allow, list }
    }

    /// The joined (not refused) channel `name`.
    pub(super) fn find(&mut self, name: &str) -> Option<&mut Sub> {
        self.find_id(names::id(name)?)
    }

    /// The joined channel whose name id is `id` (what a delivery looks for).
    pub(super) fn find_id(&mut self, id: u32) -> Option<&mut Sub> {
        self.list.iter_mut().find(|s| s.is_joined(id))
    }

    /// Adds a stream after the others (a later subscribe).
    pub(super) fn push(&mut self, sub: Sub) {
        let mut list = std::mem::take(&mut self.list).into_vec();
        list.push(sub);
        self.list = list.into_boxed_slice();
    }

    /// Where channel `name` is (joined or not).
    pub(super) fn position(&self, name: &str) -> Option<usize> {
        let id = names::id(name)?;
        self.list.iter().position(|s| s.id() == Some(id))
    }

    /// Where joined channel `name` is.
    pub(crate) fn position_joined(&self, name: &str) -> Option<usize> {
        let id = names::id(name)?;
        self.list.iter().position(|s| s.is_joined(id))
    }

    /// The stream at `i`.
    pub(super) fn at_index(&self, i: usize) -> &Sub {
        &self.list[i]
    }

    /// Puts `sub` in the place of the stream at `i`.
    pub(super) fn replace(&mut self, i: usize, sub: Sub) {
        self.list[i] = sub;
    }

    /// Takes the stream at `i` out.
    pub(super) fn remove_at(&mut self, i: usize) -> Sub {
        let mut list = std::mem::take(&mut self.list).into_vec();
        let sub = list.remove(i);
        self.list = list.into_boxed_slice();
        sub
    }

    fn channels(&self) -> impl Iterator<Item = &Sub> {
        self.list.iter().filter(|s| !s.is_user())
    }

    /// The names joined (not refused).
    pub(super) fn joined(&self) -> Vec<String> {
        self.channels()
            .filter(|s| !s.refused())
            .map(|s| s.name().to_string())
            .collect()
    }

    /// The names refused (by the token, or by the router), each with what it is told.
    pub(super) fn refused(&self) -> Vec<(String, &'static str)> {
        self.channels()
            .filter(|s| s.refused())
            .map(|s| (s.name().to_string(), s.why()))
            .collect()
    }

    /// The router refused joining `name` (`why`): it stays, never joined, for its
    /// place in a composite id, and is reported as a token's refusal is.
    pub(super) fn refuse(&mut self, name: &str, why: Refusal) {
        if let Some(sub) = self.find(name) {
            sub.tag |= match why {
                Refusal::UserLimit => REFUSED | USER_LIMIT,
            };
        }
    }

    /// Whether some channel is refused.
    pub(super) fn any_refused(&self) -> bool {
        self.channels().any(Sub::refused)
    }

    /// How many channels count against `--max-channels-per-connection` (a
    /// channel's presence companion rides with it, the friends companion too).
    pub(super) fn len(&self) -> usize {
        self.channels()
            .filter(|s| !s.refused() && !wire::channel::is_companion(&s.name()))
            .count()
    }

    /// The user's place (`None` without a user or before a position).
    pub(super) fn user_at(&self) -> Option<Since> {
        self.list.first().filter(|s| s.is_user()).and_then(Sub::at)
    }

    /// Moves the user's place (nothing without a user).
    pub(super) fn set_user_at(&mut self, at: Option<Since>) {
        if let Some(s) = self.list.first_mut().filter(|s| s.is_user()) {
            s.set_at(at);
        }
    }

    /// The composite position: the user's part (with a user), then each channel's.
    pub(super) fn write_composite(&self, out: &mut Vec<u8>) {
        wire::write_positions(out, self.list.iter().map(Sub::at));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscription_is_16_bytes_and_a_connections_list_one_allocation_of_them() {
        assert_eq!(std::mem::size_of::<Sub>(), 16);
        assert_eq!(std::mem::size_of::<Chans>(), 24);
        let name = "channels-test:list";
        let mut chans = Chans::new(
            None,
            Some(None),
            [
                Sub::new(name, None, false),
                Sub::new("list:refused", None, true),
            ],
        );
        assert!(chans.position_joined(name).is_some());
        assert!(chans.position_joined("list:refused").is_none());
        assert_eq!(chans.position("list:refused"), Some(2));
        assert_eq!(chans.joined(), vec![name.to_string()]);
        assert_eq!(
            chans.refused(),
            vec![("list:refused".to_string(), REFUSED_WHY)]
        );
        assert_eq!(chans.len(), 1);
        chans.set_user_at(Some(Since {
            epoch: Some(5),
            seq: 2,
        }));
        chans.push(Sub::new("list:later", None, false));
        let mut out = Vec::new();
        chans.write_composite(&mut out);
        assert_eq!(out, b"5-2___");
        let i = chans.position_joined(name).expect("joined");
        chans.remove_at(i);
        assert!(chans.position_joined(name).is_none());
        assert_eq!(chans.joined(), vec!["list:later".to_string()]);
        assert_eq!(chans.user_at().map(|a| a.seq), Some(2));
    }

    #[test]
    fn a_place_keeps_a_position_with_or_without_an_epoch_and_its_flags() {
        let mut s = Sub::new("channels-test:place", None, true);
        assert_eq!(s.at(), None);
        let id = s.id();
        s.set_at(Some(Since {
            epoch: None,
            seq: 4,
        }));
        assert_eq!(
            s.at(),
            Some(Since {
                epoch: None,
                seq: 4
            })
        );
        s.set_at(Some(Since {
            epoch: Some(0),
            seq: u64::MAX,
        }));
        assert_eq!(
            s.at(),
            Some(Since {
                epoch: Some(0),
                seq: u64::MAX
            })
        );
        assert!(s.refused(), "the refusal stays");
        assert_eq!(s.id(), id, "and the name");
        s.set_at(None);
        assert_eq!(s.at(), None);
    }

    #[test]
    fn a_channel_the_router_refuses_keeps_its_place_and_says_why() {
        let mut chans = Chans::new(
            None,
            None,
            [
                Sub::new("limit-test:a", None, false),
                Sub::new("limit-test:b", None, true),
            ],
        );
        chans.refuse("limit-test:a", Refusal::UserLimit);
        let at = Since {
            epoch: Some(1),
            seq: 2,
        };
        chans.list[0].set_at(Some(at));
        assert_eq!(chans.len(), 0, "refused channels do not count");
        assert_eq!(chans.list[0].at(), Some(at));
        assert_eq!(
            chans.refused(),
            [
                ("limit-test:a".to_string(), Refusal::UserLimit.text()),
                ("limit-test:b".to_string(), REFUSED_WHY)
            ]
        );
    }
}
