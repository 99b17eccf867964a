//! [`Released`]: what one call of the guard releases, held inline while it is small.

use std::borrow::Cow;

/// The pieces one call of the guard releases, in order; each borrows the piece given to it when
/// it can. Up to two are held inline (a held tail, then the piece: all that a call releases but
/// a held opening), so releasing a piece allocates nothing; more move to the heap. Reads as a
/// slice.
#[derive(Debug)]
pub(crate) struct Released<'a> {
    /// The first `inline` pieces, while there are at most two; the rest are empty.
    first: [Cow<'a, str>; 2],
    inline: u8,
    /// Every piece, once there are more than two.
    spilled: Vec<Cow<'a, str>>,
}

impl<'a> Released<'a> {
    /// Nothing released.
    pub(crate) fn new() -> Self {
        Released {
            first: [Cow::Borrowed(""), Cow::Borrowed("")],
            inline: 0,
            spilled: Vec::new(),
        }
    }

    /// `piece` alone.
    pub(crate) fn one(piece: Cow<'a, str>) -> Self {
        let mut released = Self::new();
        released.push(piece);
        released
    }

    /// Appends `piece`.
    pub(crate) fn push(&mut self, piece: Cow<'a, str>) {
        let held = usize::from(self.inline);
        if self.spilled.is_empty() && held < self.first.len() {
            self.first[held] = piece;
            self.inline += 1;
            return;
        }
        if self.spilled.is_empty() {
            self.spilled.reserve(held + 2);
            for slot in &mut self.first {
                self.spilled
                    .push(std::mem::replace(slot, Cow::Borrowed("")));
            }
            self.inline = 0;
        }
        self.spilled.push(piece);
    }
}

impl<'a> std::ops::Deref for Released<'a> {
    type Target = [Cow<'a, str>];

    fn deref(&self) -> &Self::Target {
        if self.spilled.is_empty() {
            &self.first[..usize::from(self.inline)]
        } else {
            &self.spilled
        }
    }
}

impl std::ops::DerefMut for Released<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        if self.spilled.is_empty() {
            &mut self.first[..usize::from(self.inline)]
        } else {
            &mut self.spilled
        }
    }
}

impl<'a> Extend<Cow<'a, str>> for Released<'a> {
    fn extend<I: IntoIterator<Item = Cow<'a, str>>>(&mut self, pieces: I) {
        for piece in pieces {
            self.push(piece);
        }
    }
}

impl<'a> IntoIterator for Released<'a> {
    type Item = Cow<'a, str>;
    type IntoIter = std::iter::Chain<
        std::iter::Take<std::array::IntoIter<Cow<'a, str>, 2>>,
        std::vec::IntoIter<Cow<'a, str>>,
    >;

    fn into_iter(self) -> Self::IntoIter {
        let inline = usize::from(self.inline);
        self.first.into_iter().take(inline).chain(self.spilled)
    }
}

#[cfg(test)]
impl<'a, U, const N: usize> PartialEq<[U; N]> for Released<'a>
where
    Cow<'a, str>: PartialEq<U>,
{
    fn eq(&self, other: &[U; N]) -> bool {
        self[..] == other[..]
    }
}

#[cfg(test)]
impl<'a, U> PartialEq<Vec<U>> for Released<'a>
where
    Cow<'a, str>: PartialEq<U>,
{
    fn eq(&self, other: &Vec<U>) -> bool {
        self[..] == other[..]
    }
}
