//! What the readers of text inputs (HPCC's topology, flow, CDF and FCT files) share.

/// The lines of `text` that carry content, numbered from 1 as editors number them, trimmed:
/// blank lines and `#` comments are skipped (HPCC's own files have none; ours carry their
/// attribution in comments).
pub(crate) fn content_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
}

/// A field of a line that does not parse or is out of range: what every reader of the text
/// inputs says of one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {value:?}: expected {expected}")]
pub struct BadField {
    /// The field's name.
    pub field: &'static str,
    /// The text found.
    pub value: String,
    /// What would have been accepted.
    pub expected: &'static str,
}

impl BadField {
    /// `field` read as `value`, where `expected` would have been accepted.
    pub(crate) fn new(field: &'static str, value: &str, expected: &'static str) -> Self {
        Self {
            field,
            value: value.to_owned(),
            expected,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::content_lines;

    #[test]
    fn blank_and_comment_lines_are_skipped_and_numbers_kept() {
        let text = "# a comment\n\n  1 2  \n\t\n3 4\n  # indented comment\n";
        let lines: Vec<_> = content_lines(text).collect();
        assert_eq!(lines, [(3, "1 2"), (5, "3 4")]);
    }
}
