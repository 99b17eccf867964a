//! The known name nearest to one written: the "did you mean" of every attribute's errors.

/// The candidate nearest to `written` (ignoring case), when it is near enough to be a typo.
pub(crate) fn nearest<'n>(
    written: &str,
    candidates: impl IntoIterator<Item = &'n str>,
) -> Option<&'n str> {
    let written = written.to_lowercase();
    candidates
        .into_iter()
        .map(|c| (edit_distance(&written, &c.to_lowercase()), c))
        .filter(|(d, c)| *d <= (c.chars().count() / 3).max(2) && *d < c.chars().count())
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance, over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}
