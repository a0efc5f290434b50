//! A shard's spaces, one per policy name, found by name or, for the
//! policy of the shard's previous lookup, by pointer.
//!
//! Most decisions in a row are of the same policy, whose name is the same
//! `Arc<str>` every time (the policy is built once, from the config). So
//! the space found last is tried first by comparing the name's pointer,
//! one instruction, before the name is hashed and compared. The index of
//! the space found last is only a hint: it is checked by the pointer on
//! every use, and a name the shard holds keeps its allocation alive, so an
//! equal pointer is the same name. A policy whose name is another `Arc`
//! with the same text (a config reloaded) finds the same space by name.

use std::cell::Cell;
use std::sync::Arc;

use super::Hasher;
use super::shard::Space;

#[derive(Debug, Default)]
pub(super) struct Spaces {
    list: Vec<(Arc<str>, Space)>,
    /// Index into `list` by name.
    by_name: hashbrown::HashMap<Arc<str>, usize, Hasher>,
    /// The index of the space found last (a hint, see the module docs).
    recent: Cell<usize>,
}

impl Spaces {
    fn position(&self, name: &Arc<str>) -> Option<usize> {
        let recent = self.recent.get();
        if let Some((held, _)) = self.list.get(recent)
            && Arc::ptr_eq(held, name)
        {
            return Some(recent);
        }
        let found = *self.by_name.get(&**name)?;
        self.recent.set(found);
        Some(found)
    }

    /// The space of the policy named `name`, if it has one.
    pub(super) fn get(&self, name: &Arc<str>) -> Option<&Space> {
        self.position(name).map(|i| &self.list[i].1)
    }

    /// The space of the policy named `name`, mutably, if it has one.
    pub(super) fn get_mut(&mut self, name: &Arc<str>) -> Option<&mut Space> {
        self.position(name).map(|i| &mut self.list[i].1)
    }

    /// The space of the policy named `name`, created empty when absent.
    pub(super) fn get_or_insert(&mut self, name: &Arc<str>) -> &mut Space {
        let i = match self.position(name) {
            Some(i) => i,
            None => {
                let i = self.list.len();
                self.list.push((Arc::clone(name), Space::default()));
                self.by_name.insert(Arc::clone(name), i);
                self.recent.set(i);
                i
            }
        };
        &mut self.list[i].1
    }

    /// Every space, in no particular order (tests).
    #[cfg(test)]
    pub(super) fn iter(&self) -> impl Iterator<Item = &Space> {
        self.list.iter().map(|(_, s)| s)
    }

    /// Every space, mutably.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Space> {
        self.list.iter_mut().map(|(_, s)| s)
    }

    /// Drops the spaces that hold no key.
    pub(super) fn drop_empty(&mut self) {
        let before = self.list.len();
        self.list.retain(|(_, s)| s.len() > 0);
        if self.list.len() != before {
            self.by_name.clear();
            for (i, (name, _)) in self.list.iter().enumerate() {
                self.by_name.insert(Arc::clone(name), i);
            }
        }
    }

    /// The space named `name` (tests, by text).
    #[cfg(test)]
    pub(super) fn named(&self, name: &str) -> Option<&Space> {
        self.by_name.get(name).map(|&i| &self.list[i].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::compact_key::CompactKey;

    fn mark(space: &mut Space, key: &str) {
        space
            .gcra
            .insert_unique(0, (CompactKey::new(key.as_bytes()), 1), |_| 0);
    }

    fn marked(space: Option<&Space>) -> Option<usize> {
        space.map(|s| s.gcra.len())
    }

    #[test]
    fn a_name_finds_its_own_space_by_pointer_by_text_and_after_drops() {
        let mut spaces = Spaces::default();
        let a: Arc<str> = Arc::from("a");
        let b: Arc<str> = Arc::from("b");
        let c: Arc<str> = Arc::from("c");
        mark(spaces.get_or_insert(&a), "1");
        mark(spaces.get_or_insert(&b), "1");
        mark(spaces.get_or_insert(&b), "2");
        spaces.get_or_insert(&c);
        // Another Arc with the same text (a reloaded config's policy).
        let b_again: Arc<str> = Arc::from("b");
        assert_eq!(marked(spaces.get(&b_again)), Some(2));
        assert_eq!(marked(spaces.get(&a)), Some(1));
        assert_eq!(marked(spaces.get(&Arc::from("d"))), None);
        // `c` is empty and dropped: `a` and `b` keep their spaces even
        // though indexes (and the hint) moved.
        spaces.get(&c);
        spaces.drop_empty();
        assert_eq!(marked(spaces.get(&c)), None);
        assert_eq!(marked(spaces.get(&b)), Some(2));
        assert_eq!(marked(spaces.get(&a)), Some(1));
        assert_eq!(marked(spaces.named("b")), Some(2));
        assert_eq!(spaces.iter().count(), 2);
    }

    #[test]
    fn a_stale_hint_never_finds_another_names_space() {
        let mut spaces = Spaces::default();
        let names: Vec<Arc<str>> = (0..5).map(|i| Arc::from(format!("p{i}"))).collect();
        for (i, name) in names.iter().enumerate() {
            for k in 0..=i {
                mark(spaces.get_or_insert(name), &k.to_string());
            }
        }
        // The hint points at p4, the last one; empty p1 and p3 and drop them.
        for i in [1, 3] {
            spaces.get_or_insert(&names[i]).gcra.clear();
        }
        spaces.drop_empty();
        for (i, name) in names.iter().enumerate() {
            let want = (i % 2 == 0).then_some(i + 1);
            assert_eq!(marked(spaces.get(name)), want, "{name}");
        }
    }
}
