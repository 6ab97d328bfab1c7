//! [`Object`]: JSON object members in order.

use std::collections::hash_map::RandomState;
use std::collections::HashSet;
use std::fmt;
use std::hash::BuildHasher;
use std::ops::{Index, IndexMut};

use compact_str::CompactString;

use super::{Value, LINEAR_KEY_SCAN};

/// A JSON object: members with unique keys, kept in insertion (arrival) order.
///
/// Lookups scan the members, which is faster than hashing for the handful of members a
/// protocol object has. Equality ignores member order, as JSON object equality does.
#[derive(Clone, Default)]
pub struct Object {
    members: Vec<(CompactString, Value)>,
}

static NULL: Value = Value::Null;

impl Object {
    /// An empty object (allocates nothing).
    #[must_use]
    pub const fn new() -> Self {
        Object {
            members: Vec::new(),
        }
    }

    /// An empty object with room for `capacity` members.
    #[must_use]
    pub fn with_capacity(capacity: usize) -> Self {
        Object {
            members: Vec::with_capacity(capacity),
        }
    }

    /// Number of members.
    #[must_use]
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// `true` when the object has no members.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.members.iter().position(|(k, _)| k == key)
    }

    /// The value under `key`.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.members
            .iter()
            .find_map(|(k, v)| (k == key).then_some(v))
    }

    /// The value under `key`, mutably.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.members
            .iter_mut()
            .find_map(|(k, v)| (k == key).then_some(v))
    }

    /// `true` when `key` is a member.
    #[must_use]
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
    }

    /// Set `key` to `value`. An existing member keeps its position and its old value is
    /// returned; a new member goes last.
    pub fn insert(
        &mut self,
        key: impl Into<CompactString>,
        value: impl Into<Value>,
    ) -> Option<Value> {
        let key = key.into();
        let value = value.into();
        match self.position(&key).and_then(|i| self.members.get_mut(i)) {
            Some(member) => Some(std::mem::replace(&mut member.1, value)),
            None => {
                self.members.push((key, value));
                None
            }
        }
    }

    /// Remove `key`, keeping the order of the other members.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let i = self.position(key)?;
        Some(self.members.remove(i).1)
    }

    /// Remove every member.
    pub fn clear(&mut self) {
        self.members.clear();
    }

    /// Keep only the members for which `keep` returns `true`.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &mut Value) -> bool) {
        self.members.retain_mut(|(k, v)| keep(k, v));
    }

    /// The members in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            inner: self.members.iter(),
        }
    }

    /// The members in order, values mutable.
    pub fn iter_mut(&mut self) -> IterMut<'_> {
        IterMut {
            inner: self.members.iter_mut(),
        }
    }

    /// The keys in order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.members.iter().map(|(k, _)| k.as_str())
    }

    /// The values in order.
    pub fn values(&self) -> impl ExactSizeIterator<Item = &Value> + '_ {
        self.members.iter().map(|(_, v)| v)
    }

    /// Build from members whose keys are known to be unique (a parser's or a binding's
    /// dictionary). A repeated key is reported, never silently merged.
    ///
    /// # Errors
    /// [`DuplicateKey`] naming the first key (in order) that repeats an earlier one.
    pub fn from_unique(members: Vec<(CompactString, Value)>) -> Result<Self, DuplicateKey> {
        let mut dups = KeySet::default();
        for (i, (k, _)) in members.iter().enumerate() {
            if dups.seen_before(members.get(..i).unwrap_or_default(), k) {
                return Err(DuplicateKey { key: k.clone() });
            }
        }
        Ok(Object { members })
    }

    /// Append a member without checking for an earlier one with the same key: for
    /// parsers that have already checked.
    pub(crate) fn push_unchecked(&mut self, key: CompactString, value: Value) {
        self.members.push((key, value));
    }

    /// The members as a slice, in order.
    #[must_use]
    pub fn as_slice(&self) -> &[(CompactString, Value)] {
        &self.members
    }
}

/// An object's members repeat a key ([`Object::from_unique`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("duplicate key {key:?}")]
pub struct DuplicateKey {
    /// The repeated key.
    pub key: CompactString,
}

impl DuplicateKey {
    /// Stable error code: `duplicate_key` (as the wire decoder's).
    #[must_use]
    pub fn code(&self) -> &'static str {
        "duplicate_key"
    }
}

/// Detects repeated keys while members are appended: a scan for small objects, a hash set
/// of key hashes (confirmed by a scan on a hit) past [`LINEAR_KEY_SCAN`] members, so that
/// a frame with thousands of members is still checked in linear time.
#[derive(Default)]
pub(crate) struct KeySet {
    hashes: Option<(RandomState, HashSet<u64>)>,
}

impl KeySet {
    /// Whether `key` equals the key of one of `earlier` (the members appended so far, all
    /// of which were passed to this method before).
    pub(crate) fn seen_before<K: AsRef<str>, V>(&mut self, earlier: &[(K, V)], key: &str) -> bool {
        if earlier.len() < LINEAR_KEY_SCAN {
            return earlier.iter().any(|(k, _)| k.as_ref() == key);
        }
        let (state, set) = self.hashes.get_or_insert_with(|| {
            let state = RandomState::new();
            let set = earlier
                .iter()
                .map(|(k, _)| state.hash_one(k.as_ref()))
                .collect();
            (state, set)
        });
        if set.insert(state.hash_one(key)) {
            false
        } else {
            earlier.iter().any(|(k, _)| k.as_ref() == key)
        }
    }
}

impl PartialEq for Object {
    fn eq(&self, other: &Self) -> bool {
        if self.len() != other.len() {
            return false;
        }
        // Same order (the usual case): one pass.
        if self
            .members
            .iter()
            .zip(&other.members)
            .all(|((a, _), (b, _))| a == b)
        {
            return self
                .members
                .iter()
                .zip(&other.members)
                .all(|((_, a), (_, b))| a == b);
        }
        if self.len() <= LINEAR_KEY_SCAN {
            return self.iter().all(|(k, v)| other.get(k) == Some(v));
        }
        fn sorted(o: &Object) -> Vec<&(CompactString, Value)> {
            let mut m: Vec<&(CompactString, Value)> = o.members.iter().collect();
            m.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            m
        }
        sorted(self) == sorted(other)
    }
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.members.iter().map(|(k, v)| (k.as_str(), v)))
            .finish()
    }
}

impl Index<&str> for Object {
    type Output = Value;
    /// The value under `key`, or `Value::Null` when absent (like `serde_json`).
    fn index(&self, key: &str) -> &Value {
        self.get(key).unwrap_or(&NULL)
    }
}

impl IndexMut<&str> for Object {
    /// The value under `key`, inserted as `null` first when absent.
    // `i` is in bounds: found by `position`, or the index of the member just pushed.
    // (Returning `get_mut`'s borrow from one branch and pushing in the other is what the
    // borrow checker does not accept yet.)
    #[allow(clippy::indexing_slicing)]
    fn index_mut(&mut self, key: &str) -> &mut Value {
        let i = match self.position(key) {
            Some(i) => i,
            None => {
                let i = self.members.len();
                self.members.push((key.into(), Value::Null));
                i
            }
        };
        &mut self.members[i].1
    }
}

impl<K: Into<CompactString>, V: Into<Value>> FromIterator<(K, V)> for Object {
    /// Later members with an earlier member's key replace its value in place.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut out = Object::new();
        out.extend(iter);
        out
    }
}

impl<K: Into<CompactString>, V: Into<Value>> Extend<(K, V)> for Object {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        let mut keys = KeySet::default();
        // Prime the key set with the existing members so large extends stay linear.
        for (i, (k, _)) in self.members.iter().enumerate() {
            keys.seen_before(self.members.get(..i).unwrap_or_default(), k);
        }
        for (k, v) in iter {
            let (k, v) = (k.into(), v.into());
            if keys.seen_before(&self.members, &k) {
                if let Some(slot) = self.get_mut(&k) {
                    *slot = v;
                }
            } else {
                self.members.push((k, v));
            }
        }
    }
}

/// Borrowing iterator over an [`Object`]'s members.
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    inner: std::slice::Iter<'a, (CompactString, Value)>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a Value);
    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|(k, v)| (k.as_str(), v))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}
impl ExactSizeIterator for Iter<'_> {}
impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.inner.next_back().map(|(k, v)| (k.as_str(), v))
    }
}

/// Iterator over an [`Object`]'s members with mutable values.
#[derive(Debug)]
pub struct IterMut<'a> {
    inner: std::slice::IterMut<'a, (CompactString, Value)>,
}

impl<'a> Iterator for IterMut<'a> {
    type Item = (&'a str, &'a mut Value);
    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|(k, v)| (k.as_str(), v))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}
impl ExactSizeIterator for IterMut<'_> {}

/// Owning iterator over an [`Object`]'s members.
#[derive(Debug)]
pub struct IntoIter {
    inner: std::vec::IntoIter<(CompactString, Value)>,
}

impl Iterator for IntoIter {
    type Item = (CompactString, Value);
    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}
impl ExactSizeIterator for IntoIter {}

impl IntoIterator for Object {
    type Item = (CompactString, Value);
    type IntoIter = IntoIter;
    fn into_iter(self) -> IntoIter {
        IntoIter {
            inner: self.members.into_iter(),
        }
    }
}

impl<'a> IntoIterator for &'a Object {
    type Item = (&'a str, &'a Value);
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl<'a> IntoIterator for &'a mut Object {
    type Item = (&'a str, &'a mut Value);
    type IntoIter = IterMut<'a>;
    fn into_iter(self) -> IterMut<'a> {
        self.iter_mut()
    }
}

impl From<serde_json::Map<String, serde_json::Value>> for Object {
    fn from(map: serde_json::Map<String, serde_json::Value>) -> Self {
        // A serde_json map's keys are unique already.
        Object {
            members: map
                .into_iter()
                .map(|(k, v)| (CompactString::from(k), Value::from(v)))
                .collect(),
        }
    }
}

impl TryFrom<serde_json::Value> for Object {
    /// The value, when it is not an object.
    type Error = serde_json::Value;
    fn try_from(value: serde_json::Value) -> Result<Self, serde_json::Value> {
        match value {
            serde_json::Value::Object(map) => Ok(map.into()),
            other => Err(other),
        }
    }
}

impl TryFrom<Value> for Object {
    /// The value, when it is not an object.
    type Error = Value;
    fn try_from(value: Value) -> Result<Self, Value> {
        match value {
            Value::Object(object) => Ok(object),
            other => Err(other),
        }
    }
}

impl From<Object> for serde_json::Map<String, serde_json::Value> {
    fn from(object: Object) -> Self {
        let mut out = serde_json::Map::with_capacity(object.len());
        for (k, v) in object {
            out.insert(k.into_string(), v.into());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_keeps_position_and_remove_keeps_order() {
        let mut o = Object::new();
        o.insert("a", 1u64);
        o.insert("b", 2u64);
        o.insert("c", 3u64);
        assert_eq!(o.insert("a", 10u64), Some(Value::from(1u64)));
        assert_eq!(o.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(o.remove("b"), Some(Value::from(2u64)));
        assert_eq!(o.keys().collect::<Vec<_>>(), ["a", "c"]);
        assert_eq!(o["a"], Value::from(10u64));
        assert!(o["zzz"].is_null());
        assert_eq!(o.remove("b"), None);
    }

    #[test]
    fn equality_ignores_order_small_and_large() {
        for n in [3usize, 40] {
            let a: Object = (0..n).map(|i| (format!("k{i}"), i as u64)).collect();
            let b: Object = (0..n).rev().map(|i| (format!("k{i}"), i as u64)).collect();
            assert_eq!(a, b);
            let mut c = b.clone();
            c.insert("k0", 99u64);
            assert_ne!(a, c);
            let mut d = b.clone();
            d.remove("k1");
            d.insert("other", 1u64);
            assert_ne!(a, d);
        }
    }

    #[test]
    fn from_iter_later_duplicate_replaces_in_place_at_any_size() {
        for n in [4usize, 100] {
            let mut items: Vec<(String, u64)> = (0..n).map(|i| (format!("k{i}"), 0)).collect();
            items.push(("k1".into(), 7));
            let o: Object = items.into_iter().collect();
            assert_eq!(o.len(), n);
            assert_eq!(o.keys().nth(1), Some("k1"));
            assert_eq!(o["k1"].as_u64(), Some(7));
        }
    }

    #[test]
    fn from_unique_reports_the_first_repeat() {
        for n in [3usize, 50] {
            let mut m: Vec<(CompactString, Value)> = (0..n)
                .map(|i| (format!("k{i}").into(), Value::Null))
                .collect();
            assert!(Object::from_unique(m.clone()).is_ok());
            m.push(("k2".into(), Value::Null));
            m.push(("k0".into(), Value::Null));
            let err = Object::from_unique(m).unwrap_err();
            assert_eq!((err.key.as_str(), err.code()), ("k2", "duplicate_key"));
            assert_eq!(err.to_string(), r#"duplicate key "k2""#);
        }
    }

    #[test]
    fn try_from_takes_objects_only() {
        let o = Object::try_from(serde_json::json!({"a": 1})).unwrap();
        assert_eq!(o["a"].as_u64(), Some(1));
        assert_eq!(
            Object::try_from(serde_json::json!([1])).unwrap_err(),
            serde_json::json!([1])
        );
        assert_eq!(Object::try_from(Value::from(o.clone())).unwrap(), o);
        assert_eq!(Object::try_from(Value::Null).unwrap_err(), Value::Null);
    }

    #[test]
    fn serde_json_map_round_trip_keeps_order() {
        let v = serde_json::json!({"z": 1, "a": [true, null, "x"], "m": {"q": 1.5, "b": -3}});
        let serde_json::Value::Object(map) = v.clone() else {
            unreachable!()
        };
        let o = Object::from(map);
        assert_eq!(o.keys().collect::<Vec<_>>(), ["z", "a", "m"]);
        let back = serde_json::Map::from(o);
        assert_eq!(serde_json::to_string(&back).unwrap(), v.to_string());
    }
}
