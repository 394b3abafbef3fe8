//! What a connection with channels keeps (a connection without channels keeps
//! nothing: `Connection::chans` is `None`, 8 bytes): a boxed [`Chans`], one 32-byte
//! [`Sub`] per channel — the name shared with every other subscriber of the process
//! ([`intern`]) and the position packed ([`Place`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use wire::Since;

/// The channels of one connection.
#[derive(Debug, Default)]
pub(crate) struct Chans {
    /// The channels the token allows (`None`: no JWT configured, all of them).
    pub(super) allow: Option<Box<auth::ChannelGrant>>,
    /// The user's position (the first part of a composite id), when the
    /// connection has a user.
    pub(super) user: Place,
    /// In the request's order (the order of a composite id's parts), then those a
    /// WebSocket subscribed to later.
    pub(super) list: Vec<Sub>,
}

/// A position packed in 16 bytes (an `Option<Since>` and a flag would take 24).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Place {
    seq: u64,
    epoch: u32,
    flags: u8,
}

const HAS_AT: u8 = 1;
const HAS_EPOCH: u8 = 2;
/// Refused (the token does not allow the channel, or it was left): kept only for
/// its place in a composite id, never joined.
const REFUSED: u8 = 4;
/// Joined after the request (its part follows the request's in a composite id, so
/// leaving it need not keep its place).
const LATER: u8 = 8;

impl Place {
    pub(super) fn get(&self) -> Option<Since> {
        (self.flags & HAS_AT != 0).then_some(Since {
            epoch: (self.flags & HAS_EPOCH != 0).then_some(self.epoch),
            seq: self.seq,
        })
    }

    pub(super) fn set(&mut self, at: Option<Since>) {
        self.flags &= REFUSED | LATER;
        if let Some(at) = at {
            self.flags |= HAS_AT;
            self.seq = at.seq;
            if let Some(e) = at.epoch {
                self.flags |= HAS_EPOCH;
                self.epoch = e;
            }
        }
    }
}

/// One channel of a connection: 32 bytes.
#[derive(Debug)]
pub(super) struct Sub {
    pub(super) name: Arc<str>,
    /// The last position delivered (or where the client resumed).
    pub(super) place: Place,
}

impl Sub {
    pub(super) fn new(name: &str, at: Option<Since>, refused: bool) -> Sub {
        let mut place = Place::default();
        place.set(at);
        if refused {
            place.flags |= REFUSED;
        }
        Sub {
            name: intern(name),
            place,
        }
    }

    /// A channel joined after the request.
    pub(super) fn new_later(name: &str, at: Option<Since>) -> Sub {
        let mut sub = Sub::new(name, at, false);
        sub.place.flags |= LATER;
        sub
    }

    pub(super) fn later(&self) -> bool {
        self.place.flags & LATER != 0
    }

    pub(super) fn at(&self) -> Option<Since> {
        self.place.get()
    }

    pub(super) fn set_at(&mut self, at: Option<Since>) {
        self.place.set(at);
    }

    pub(super) fn refused(&self) -> bool {
        self.place.flags & REFUSED != 0
    }
}

impl Drop for Sub {
    fn drop(&mut self) {
        release(&self.name);
    }
}

/// The process's channel names held by connections: one allocation per name,
/// however many connections hold it (a name is up to 200 bytes; a subscriber
/// keeps 16 for it). Taken only when a connection subscribes or lets go, never
/// per message.
static NAMES: Mutex<Option<HashSet<Arc<str>>>> = Mutex::new(None);

fn intern(name: &str) -> Arc<str> {
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    let names = names.get_or_insert_with(HashSet::new);
    if let Some(held) = names.get(name) {
        return held.clone();
    }
    let held: Arc<str> = name.into();
    names.insert(held.clone());
    held
}

/// A subscriber lets go of `name`: the table forgets a name nobody else holds.
fn release(name: &Arc<str>) {
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    // The table's and the caller's.
    if Arc::strong_count(name) == 2 {
        if let Some(names) = names.as_mut() {
            names.remove(name);
        }
    }
}

impl Chans {
    pub(super) fn find(&mut self, name: &str) -> Option<&mut Sub> {
        self.list
            .iter_mut()
            .find(|s| &*s.name == name && !s.refused())
    }

    /// The names joined (not refused).
    pub(super) fn joined(&self) -> Vec<String> {
        self.list
            .iter()
            .filter(|s| !s.refused())
            .map(|s| s.name.to_string())
            .collect()
    }

    /// The names refused (the token does not allow them).
    pub(super) fn refused(&self) -> Vec<String> {
        self.list
            .iter()
            .filter(|s| s.refused())
            .map(|s| s.name.to_string())
            .collect()
    }

    /// How many channels count against `--max-channels-per-connection`.
    pub(super) fn len(&self) -> usize {
        self.list.iter().filter(|s| !s.refused()).count()
    }

    /// The composite position: the user's part (with a user), then each channel's.
    pub(super) fn write_composite(&self, out: &mut Vec<u8>, user: bool) {
        let user_part = user.then(|| self.user.get());
        let parts = user_part.into_iter().chain(self.list.iter().map(Sub::at));
        wire::write_positions(out, parts);
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscription_is_32_bytes_and_names_are_shared_then_forgotten() {
        assert_eq!(std::mem::size_of::<Sub>(), 32);
        let name = "channels-test:shared";
        let a = Sub::new(name, None, false);
        let b = Sub::new(
            name,
            Some(Since {
                epoch: Some(3),
                seq: 9,
            }),
            true,
        );
        assert!(Arc::ptr_eq(&a.name, &b.name), "one allocation per name");
        assert_eq!(
            b.at(),
            Some(Since {
                epoch: Some(3),
                seq: 9
            })
        );
        assert!(b.refused() && !a.refused());
        drop(a);
        drop(b);
        let held = NAMES
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|n| n.contains(name));
        assert!(!held, "a name nobody holds is forgotten");
    }

    #[test]
    fn a_place_keeps_a_position_with_or_without_an_epoch_and_its_flag() {
        let mut p = Place::default();
        assert_eq!(p.get(), None);
        p.flags |= REFUSED;
        p.set(Some(Since {
            epoch: None,
            seq: 4,
        }));
        assert_eq!(
            p.get(),
            Some(Since {
                epoch: None,
                seq: 4
            })
        );
        p.set(Some(Since {
            epoch: Some(0),
            seq: u64::MAX,
        }));
        assert_eq!(
            p.get(),
            Some(Since {
                epoch: Some(0),
                seq: u64::MAX
            })
        );
        assert_ne!(p.flags & REFUSED, 0, "the refusal stays");
        p.set(None);
        assert_eq!(p.get(), None);
    }
}
