//! A slab of records with generation-checked keys: a stale key of a gone
//! connector or listener finds nothing, and `remove` never allocates.

use alloc::vec::Vec;

use super::types::CmError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Key {
    pub(super) index: u32,
    pub(super) generation: u32,
}

pub(super) struct Slab<T> {
    pub(super) slots: Vec<(u32, Option<T>)>,
    /// Free slot indexes; its capacity covers every slot, so that `remove`
    /// never allocates.
    free: Vec<u32>,
}

impl<T> Slab<T> {
    pub(super) const fn new() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    pub(super) fn insert(&mut self, value: T) -> Result<Key, CmError> {
        if let Some(index) = self.free.pop()
            && let Some((generation, slot)) = self.slots.get_mut(index as usize)
        {
            *slot = Some(value);
            return Ok(Key {
                index,
                generation: *generation,
            });
        }
        let index = u32::try_from(self.slots.len()).map_err(|_| CmError::Resources)?;
        self.slots.try_reserve(1).map_err(|_| CmError::Resources)?;
        let wanted = self.slots.len() + 1;
        self.free
            .try_reserve(wanted.saturating_sub(self.free.len()))
            .map_err(|_| CmError::Resources)?;
        self.slots.push((0, Some(value)));
        Ok(Key {
            index,
            generation: 0,
        })
    }

    pub(super) fn get(&self, key: Key) -> Option<&T> {
        match self.slots.get(key.index as usize) {
            Some((generation, value)) if *generation == key.generation => value.as_ref(),
            _ => None,
        }
    }

    pub(super) fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        match self.slots.get_mut(key.index as usize) {
            Some((generation, value)) if *generation == key.generation => value.as_mut(),
            _ => None,
        }
    }

    pub(super) fn remove(&mut self, key: Key) -> Option<T> {
        let (generation, slot) = self.slots.get_mut(key.index as usize)?;
        if *generation != key.generation {
            return None;
        }
        let value = slot.take()?;
        *generation = generation.wrapping_add(1);
        self.free.push(key.index);
        Some(value)
    }

    /// The key of the first record that matches.
    pub(super) fn find(&self, mut matches: impl FnMut(&T) -> bool) -> Option<Key> {
        self.slots
            .iter()
            .enumerate()
            .find_map(|(index, (generation, value))| {
                let value = value.as_ref()?;
                let index = u32::try_from(index).ok()?;
                matches(value).then_some(Key {
                    index,
                    generation: *generation,
                })
            })
    }

    pub(super) fn count(&self, mut matches: impl FnMut(&T) -> bool) -> usize {
        self.slots
            .iter()
            .filter(|(_, value)| value.as_ref().is_some_and(&mut matches))
            .count()
    }
}
