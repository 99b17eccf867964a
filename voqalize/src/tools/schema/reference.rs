//! The one parser of JSON-Schema `$ref`s within a document, shared by the schema rewrites, the
//! dispatcher and `voqalize types`.
//!
//! Three forms are understood, the ones schemars writes: `#` (the root), `#/$defs/<name>` and
//! `#/definitions/<name>`. The name is a JSON-pointer token: `~1` reads as `/` and `~0` as `~`, in
//! that order (so `~01` is the name `~1`). Anything else (a remote reference, a deeper pointer
//! such as `#/properties/a`) is not understood and yields `None`.

use serde_json::Value;

/// The table of named schemas a reference points into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DefTable {
    /// `$defs` (draft 2019-09 and later, what voqalize's generators write).
    Defs,
    /// `definitions` (drafts 4 to 7).
    Definitions,
}

impl DefTable {
    /// The key of the table in the root schema.
    pub(crate) fn key(self) -> &'static str {
        match self {
            DefTable::Defs => "$defs",
            DefTable::Definitions => "definitions",
        }
    }
}

/// A parsed `$ref`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SchemaRef {
    /// `#`: the whole document (a recursive root).
    Root,
    /// `#/$defs/<name>` or `#/definitions/<name>`, the name unescaped.
    Def {
        /// The table named in the reference.
        table: DefTable,
        /// The schema's name, JSON-pointer escapes undone.
        name: String,
    },
}

impl SchemaRef {
    /// Parses a reference; `None` for a form voqalize does not follow.
    pub(crate) fn parse(reference: &str) -> Option<SchemaRef> {
        if reference == "#" {
            return Some(SchemaRef::Root);
        }
        let (table, token) = if let Some(token) = reference.strip_prefix("#/$defs/") {
            (DefTable::Defs, token)
        } else {
            (
                DefTable::Definitions,
                reference.strip_prefix("#/definitions/")?,
            )
        };
        Some(SchemaRef::Def {
            table,
            name: unescape(token),
        })
    }

    /// The `$ref` of a schema of `$defs`, its name escaped (the inverse of [`SchemaRef::parse`]).
    pub(crate) fn to_defs(name: &str) -> String {
        format!("#/$defs/{}", escape(name))
    }

    /// The schema the reference names in the document `root` (in the table it names).
    pub(crate) fn target<'v>(&self, root: &'v Value) -> Option<&'v Value> {
        match self {
            SchemaRef::Root => Some(root),
            SchemaRef::Def { table, name } => root.get(table.key())?.get(name),
        }
    }
}

/// Undoes JSON-pointer escaping: `~1` → `/`, then `~0` → `~`.
fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// JSON-pointer escaping: `~` → `~0`, then `/` → `~1`.
fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def(table: DefTable, name: &str) -> Option<SchemaRef> {
        Some(SchemaRef::Def {
            table,
            name: name.into(),
        })
    }

    #[test]
    fn the_three_forms_parse() {
        assert_eq!(SchemaRef::parse("#"), Some(SchemaRef::Root));
        assert_eq!(
            SchemaRef::parse("#/$defs/Tree"),
            def(DefTable::Defs, "Tree")
        );
        assert_eq!(
            SchemaRef::parse("#/definitions/Tree"),
            def(DefTable::Definitions, "Tree")
        );
    }

    #[test]
    fn other_forms_are_not_followed() {
        for r in [
            "",
            "Tree",
            "#/properties/a",
            "#/$def/Tree",
            "other.json#/$defs/A",
        ] {
            assert_eq!(SchemaRef::parse(r), None, "{r}");
        }
    }

    #[test]
    fn json_pointer_escapes_are_undone_in_order() {
        assert_eq!(
            SchemaRef::parse("#/$defs/a~1b~0c"),
            def(DefTable::Defs, "a/b~c")
        );
        // `~01` is `~` followed by `1`, not `/`.
        assert_eq!(SchemaRef::parse("#/$defs/~01"), def(DefTable::Defs, "~1"));
        for name in ["a/b~c", "~1", "~0/", "plain"] {
            assert_eq!(
                SchemaRef::parse(&SchemaRef::to_defs(name)),
                def(DefTable::Defs, name)
            );
        }
    }

    #[test]
    fn a_reference_finds_its_target_in_its_own_table() {
        let root = json!({
            "$defs": {"a/b~c": {"type": "string"}},
            "definitions": {"n": {"type": "number"}},
        });
        let target = |r: &str| SchemaRef::parse(r).and_then(|r| r.target(&root).cloned());
        assert_eq!(target("#/$defs/a~1b~0c"), Some(json!({"type": "string"})));
        assert_eq!(target("#/definitions/n"), Some(json!({"type": "number"})));
        assert_eq!(target("#/$defs/n"), None);
        assert_eq!(target("#"), Some(root.clone()));
    }
}
