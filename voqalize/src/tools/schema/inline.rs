//! Step 1: every `$ref` inlined (see the module above for the rules). References are parsed by
//! [`SchemaRef`], the one `$ref` parser.

use serde_json::{Map, Value, json};

use super::Dialect;
use super::keywords::{ONE_SCHEMA, SCHEMA_LISTS, SCHEMA_MAPS};
use super::merge::merge_schema;
use super::reference::SchemaRef;

/// A schema being inlined, as the recursion check sees it: the root or a definition by name
/// (whichever table the reference named: the inliner merges both).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RefKey {
    Root,
    Def(String),
}

impl RefKey {
    fn parse(reference: &str) -> Option<RefKey> {
        Some(match SchemaRef::parse(reference)? {
            SchemaRef::Root => RefKey::Root,
            SchemaRef::Def { name, .. } => RefKey::Def(name),
        })
    }

    fn canonical(&self) -> String {
        match self {
            RefKey::Root => "#".into(),
            RefKey::Def(name) => SchemaRef::to_defs(name),
        }
    }
}

pub(super) struct Inliner<'a> {
    root: &'a Value,
    pub(super) defs: Map<String, Value>,
    dialect: Dialect,
    /// Recursive definitions that stay as `$defs` (OpenAI only), in discovery order.
    pub(super) kept: Vec<RefKey>,
}

impl<'a> Inliner<'a> {
    pub(super) fn new(root: &'a Value, dialect: Dialect) -> Self {
        let mut defs = Map::new();
        for key in ["definitions", "$defs"] {
            if let Some(Value::Object(d)) = root.get(key) {
                for (k, v) in d {
                    defs.insert(k.clone(), v.clone());
                }
            }
        }
        Inliner {
            root,
            defs,
            dialect,
            kept: Vec::new(),
        }
    }

    pub(super) fn inline_root(&mut self) -> Value {
        let mut stack = vec![RefKey::Root];
        let root = self.root;
        self.inline(root, &mut stack)
    }

    /// A schema in a position where `true` means "anything".
    fn inline_schema(&mut self, node: &Value, stack: &mut Vec<RefKey>) -> Value {
        match node {
            Value::Bool(true) => json!({}),
            other => self.inline(other, stack),
        }
    }

    pub(super) fn inline(&mut self, node: &Value, stack: &mut Vec<RefKey>) -> Value {
        let Value::Object(m) = node else {
            return node.clone();
        };
        if let Some(Value::String(reference)) = m.get("$ref") {
            let siblings: Map<String, Value> = m
                .iter()
                .filter(|(k, _)| k.as_str() != "$ref")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let siblings = match self.inline(&Value::Object(siblings), stack) {
                Value::Object(s) => s,
                _ => Map::new(),
            };
            let Some(key) = RefKey::parse(reference) else {
                return Value::Object(siblings);
            };
            let target = match &key {
                RefKey::Root => Some(self.root.clone()),
                RefKey::Def(name) => self.defs.get(name).cloned(),
            };
            let Some(target) = target else {
                return Value::Object(siblings);
            };
            if stack.contains(&key) {
                return self.recursive_ref(key, siblings);
            }
            stack.push(key);
            let inlined = self.inline_schema(&target, stack);
            stack.pop();
            let mut out = match inlined {
                Value::Object(o) => o,
                _ => Map::new(),
            };
            merge_schema(&mut out, siblings);
            return Value::Object(out);
        }
        let mut out = Map::new();
        for (k, v) in m {
            let v = match k.as_str() {
                "$defs" | "definitions" | "$schema" => continue,
                key if SCHEMA_MAPS.contains(&key) => match v {
                    Value::Object(props) => Value::Object(
                        props
                            .iter()
                            .map(|(name, s)| (name.clone(), self.inline_schema(s, stack)))
                            .collect(),
                    ),
                    other => other.clone(),
                },
                key if SCHEMA_LISTS.contains(&key) => match v {
                    Value::Array(list) => {
                        Value::Array(list.iter().map(|s| self.inline_schema(s, stack)).collect())
                    }
                    other => other.clone(),
                },
                // `true` ("anything") becomes `{}`, so the later passes see a schema object
                // (and strict mode reports it); `false` stays (a closed object or tuple).
                key if ONE_SCHEMA.contains(&key) => self.inline_schema(v, stack),
                _ => v.clone(),
            };
            out.insert(k.clone(), v);
        }
        Value::Object(out)
    }

    fn recursive_ref(&mut self, key: RefKey, siblings: Map<String, Value>) -> Value {
        let description = siblings.get("description").cloned();
        match self.dialect {
            Dialect::Gemini => {
                let mut out = Map::new();
                out.insert("type".into(), json!("object"));
                if let Some(d) = description {
                    out.insert("description".into(), d);
                }
                Value::Object(out)
            }
            Dialect::OpenAi | Dialect::OpenAiStrict => {
                if !self.kept.contains(&key) {
                    self.kept.push(key.clone());
                }
                let mut out = Map::new();
                out.insert("$ref".into(), json!(key.canonical()));
                // Strict mode allows no sibling beside `$ref`.
                if self.dialect == Dialect::OpenAi
                    && let Some(d) = description
                {
                    out.insert("description".into(), d);
                }
                Value::Object(out)
            }
        }
    }
}
