//! Prototxt (protobuf text format) reading over a runtime descriptor pool: the builtin
//! schema (`proto/caffe.proto`, compiled by `cargo xtask codegen` into
//! `generated/caffe.fds`) or a fork's `caffe.proto` compiled at run time with protox.
//!
//! The text parser is prost-reflect's (strict: an unknown field name is an error).
//! What this module adds around it: a size check against [`Limits`] and a nesting-depth
//! bound before parsing (the parser recurses once per nested message), parse errors
//! mapped to line:column, the line of each top-level `layer`/`layers` block, fork
//! snippets merged into the builtin schema, and the translation of a fork-schema
//! message into the builtin typed [`crate::proto`] structs (by field name).

use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;

use prost_reflect::{DescriptorPool, DynamicMessage, Kind, MessageDescriptor, Value};
use tensorfmt_core::Limits;

use crate::error::{CaffeError, Result};

/// The encoded FileDescriptorSet of `proto/caffe.proto` (written by `cargo xtask codegen`).
static BUILTIN_FDS: &[u8] = include_bytes!("generated/caffe.fds");
/// The builtin schema's source, for merging fork snippets into it.
static BUILTIN_SOURCE: &str = include_str!("../../../proto/caffe.proto");

/// Deepest nesting of `{`/`<` blocks accepted in a prototxt or a fork proto. Caffe's
/// schema nests at most 5 deep (layer > detection_output_param > save_output_param ...);
/// the bound keeps the recursive parsers far from the stack limit.
pub const MAX_NESTING: usize = 64;

/// Largest fork `.proto` accepted by [`Schema::compile`] (BVLC's is 60 KB, the largest
/// fork in the corpus 90 KB).
pub const MAX_SCHEMA_BYTES: u64 = 16 << 20;

/// Bytes of parsed structure budgeted per byte of prototxt text when checking its size
/// against [`Limits::max_alloc`] (a dynamic message costs a few dozen bytes per field).
pub const PROTOTXT_ALLOC_FACTOR: u64 = 64;

/// A Caffe schema: the descriptor pool prototxts are parsed with.
///
/// [`Schema::builtin`] is `proto/caffe.proto` (BVLC's caffe.proto with the fields of
/// SSD, OpenCV, py-faster-rcnn, R-FCN, DeepLab/PSPNet's Interp, SegNet/ENet/PSPNet's BN
/// and Upsample, ShuffleNet and the YOLOv2 ports built in: see [`crate::forks`]);
/// [`Schema::compile`] compiles another fork's `caffe.proto` at run time so that its
/// extra fields (`dense_image_data_param`, `seg_accuracy_param`, ...) parse and are
/// readable through [`crate::LayerDef::fork_field`].
///
/// ```
/// let schema = tensorfmt_caffe::Schema::builtin();
/// assert!(schema.is_builtin());
/// assert!(schema.has_field("LayerParameter", "prior_box_param"));
/// assert!(schema.has_field("DetectionOutputParameter", "visualize"));
/// assert!(schema.has_field("DetectionOutputParameter", "normalized_bbox"));
/// assert!(schema.has_field("LayerParameter", "upsample_param"));
/// assert!(!schema.has_field("LayerParameter", "dense_image_data_param"));
/// ```
#[derive(Clone)]
pub struct Schema {
    pub(crate) pool: DescriptorPool,
    net: MessageDescriptor,
    origin: String,
    builtin: bool,
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schema")
            .field("origin", &self.origin)
            .finish()
    }
}

impl Schema {
    /// The builtin schema, loaded once from the checked-in descriptor set.
    pub fn builtin() -> &'static Schema {
        static BUILTIN: OnceLock<Schema> = OnceLock::new();
        BUILTIN.get_or_init(|| {
            // The descriptor set is generated and checked in (the `codegen_is_fresh`
            // test guards it), so a failure here is a build defect, not bad input.
            let pool = DescriptorPool::decode(BUILTIN_FDS)
                .expect("generated/caffe.fds is a valid descriptor set");
            let net = pool
                .get_message_by_name("caffe.NetParameter")
                .expect("caffe.fds defines caffe.NetParameter");
            Schema {
                pool,
                net,
                origin: "the builtin schema".into(),
                builtin: true,
            }
        })
    }

    /// Compiles a fork's schema at run time (protox, no `protoc`).
    ///
    /// A complete `caffe.proto` (one that defines `message NetParameter`) is compiled as
    /// is. Anything else is taken as a snippet of additions to the builtin schema (the
    /// form forks document in their README, e.g. ShuffleNet's
    /// `message LayerParameter { ... optional ShuffleChannelParameter
    /// shuffle_channel_param = 164; ... }` plus `message ShuffleChannelParameter`): the
    /// fields of each message the builtin schema has are added to it, lines that are
    /// just `...` are dropped, and new messages and enums are added whole.
    ///
    /// The file is refused above [`MAX_SCHEMA_BYTES`] (or `limits.max_alloc / 64`), when
    /// nested deeper than [`MAX_NESTING`], when it does not compile, or when it has no
    /// `caffe.NetParameter`; imports are not followed.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("shufflenet.proto.snippet");
    /// std::fs::write(&path, "message LayerParameter {\n...\noptional ShuffleChannelParameter \
    ///     shuffle_channel_param = 164;\n...\n}\nmessage ShuffleChannelParameter {\n  \
    ///     optional uint32 group = 1 [default = 1];\n}\n")?;
    /// let schema = tensorfmt_caffe::Schema::compile(&path, &Default::default())?;
    /// assert!(schema.has_field("LayerParameter", "shuffle_channel_param"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn compile(path: &Path, limits: &Limits) -> Result<Schema> {
        let shown = path.display().to_string();
        let err = |reason: String| CaffeError::Schema {
            path: shown.clone(),
            reason,
        };
        let cap = MAX_SCHEMA_BYTES.min(limits.max_alloc / 64);
        // A regular file only (a FIFO is refused, not waited on), read up to the cap.
        let bytes = tensorfmt_core::io::read_file_capped(path, cap, "schema bytes").map_err(
            |e| match e {
                tensorfmt_core::Error::LimitExceeded { value, .. } => err(format!(
                    "{value} bytes exceeds the schema size limit of {cap} bytes"
                )),
                e => err(format!("cannot read: {e}")),
            },
        )?;
        let text = String::from_utf8(bytes.to_vec()).map_err(|_| err("not UTF-8 text".into()))?;
        Schema::compile_source(&shown, &text)
    }

    /// [`Schema::compile`] from source text (`name` is used in messages only).
    pub fn compile_source(name: &str, text: &str) -> Result<Schema> {
        let text = strip_bom(text);
        let err = |reason: String| CaffeError::Schema {
            path: name.to_string(),
            reason,
        };
        if text.len() as u64 > MAX_SCHEMA_BYTES {
            return Err(err(format!(
                "{} bytes exceeds the schema size limit of {MAX_SCHEMA_BYTES} bytes",
                text.len()
            )));
        }
        let scan = scan(text, Syntax::Proto);
        if let Some((line, col)) = scan.too_deep {
            return Err(err(format!(
                "line {line}:{col}: nested deeper than {MAX_NESTING} levels"
            )));
        }
        let full = scan.top_messages.iter().any(|m| m.name == "NetParameter");
        let source = if full {
            text.to_string()
        } else {
            merge_snippet(text, &scan).map_err(err)?
        };
        let pool = compile_proto(&source).map_err(|e| {
            err(if full {
                e
            } else {
                format!("{e} (compiled as additions to the builtin schema)")
            })
        })?;
        let net = pool
            .get_message_by_name("caffe.NetParameter")
            .ok_or_else(|| err("defines no message caffe.NetParameter (package caffe)".into()))?;
        Ok(Schema {
            pool,
            net,
            origin: name.to_string(),
            builtin: false,
        })
    }

    /// Whether this is [`Schema::builtin`].
    pub fn is_builtin(&self) -> bool {
        self.builtin
    }

    /// Where the schema came from: "the builtin schema" or the fork file's path.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Whether message `caffe.<message>` has a field named `field`.
    pub fn has_field(&self, message: &str, field: &str) -> bool {
        self.pool
            .get_message_by_name(&format!("caffe.{message}"))
            .is_some_and(|m| m.get_field_by_name(field).is_some())
    }

    pub(crate) fn net_descriptor(&self) -> &MessageDescriptor {
        &self.net
    }
}

/// Compiles one in-memory `.proto` file named `caffe.proto`.
fn compile_proto(source: &str) -> std::result::Result<DescriptorPool, String> {
    struct Memory(String);
    impl protox::file::FileResolver for Memory {
        fn open_file(&self, name: &str) -> std::result::Result<protox::file::File, protox::Error> {
            if name == "caffe.proto" {
                protox::file::File::from_source(name, &self.0)
            } else {
                Err(protox::Error::file_not_found(name))
            }
        }
    }
    let mut chain = protox::file::ChainFileResolver::new();
    chain.add(Memory(source.to_string()));
    chain.add(protox::file::GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(chain);
    compiler.include_imports(true);
    compiler
        .open_file("caffe.proto")
        .map_err(|e| e.to_string())?;
    Ok(compiler.descriptor_pool())
}

/// Merges a snippet's messages into the builtin source (see [`Schema::compile`]).
fn merge_snippet(text: &str, scan: &Scan) -> std::result::Result<String, String> {
    let base_scan = scan_cached();
    let base: HashMap<&str, &Block> = base_scan
        .top_messages
        .iter()
        .map(|b| (b.name.as_str(), b))
        .collect();
    // Insertions into the builtin source, by byte offset of the closing brace.
    let mut inserts: Vec<(usize, String)> = Vec::new();
    let mut appended = String::new();
    let mut covered = vec![false; text.len() + 1];
    for block in &scan.top_messages {
        for c in &mut covered[block.start..block.end] {
            *c = true;
        }
        let body = drop_ellipses(&text[block.body_start..block.body_end]);
        match base.get(block.name.as_str()) {
            Some(b) if block.keyword == "message" => {
                // Fields the builtin message already has (the builtin schema carries
                // most forks' fields) are not declared twice.
                let builtin = Schema::builtin()
                    .pool
                    .get_message_by_name(&format!("caffe.{}", block.name));
                let body = without_known_fields(&body, |name| {
                    builtin
                        .as_ref()
                        .is_some_and(|m| m.get_field_by_name(name).is_some())
                });
                inserts.push((
                    b.body_end,
                    format!("\n  // added by the fork schema\n{body}\n"),
                ))
            }
            Some(_) => {
                return Err(format!(
                    "{} {} is already defined by the builtin schema",
                    block.keyword, block.name
                ))
            }
            None => {
                appended.push_str(&format!(
                    "\n{} {} {{{body}\n}}\n",
                    block.keyword, block.name
                ));
            }
        }
    }
    // Anything outside message/enum blocks must be `...`, comments or whitespace.
    let rest: String = text
        .char_indices()
        .filter(|(i, _)| !covered[*i])
        .map(|(_, c)| c)
        .collect();
    let rest = strip_proto_comments(&rest);
    for line in rest.lines() {
        let t = line.trim();
        if !(t.is_empty() || t == "..." || t.starts_with("syntax") || t.starts_with("package")) {
            return Err(format!(
                "a schema snippet may only hold message and enum blocks (found {t:?})"
            ));
        }
    }
    inserts.sort_by_key(|(at, _)| *at);
    let mut out = String::with_capacity(BUILTIN_SOURCE.len() + text.len());
    let mut at = 0;
    for (pos, ins) in inserts {
        out.push_str(&BUILTIN_SOURCE[at..pos]);
        out.push_str(&ins);
        at = pos;
    }
    out.push_str(&BUILTIN_SOURCE[at..]);
    out.push_str(&appended);
    Ok(out)
}

fn scan_cached() -> &'static Scan {
    static SCAN: OnceLock<Scan> = OnceLock::new();
    SCAN.get_or_init(|| scan(BUILTIN_SOURCE, Syntax::Proto))
}

/// `body` (a message body of a schema snippet) without the field declarations whose
/// name `known` accepts; nested blocks and everything else are kept.
fn without_known_fields(body: &str, known: impl Fn(&str) -> bool) -> String {
    let body = strip_proto_comments(body);
    let mut out = String::with_capacity(body.len());
    let mut statement = String::new();
    let mut depth = 0usize;
    for c in body.chars() {
        statement.push(c);
        match c {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    out.push_str(&std::mem::take(&mut statement));
                }
            }
            ';' if depth == 0 => {
                // `[label] type name = number [options];`: the name precedes `=`.
                let taken = std::mem::take(&mut statement);
                let name = taken
                    .split('=')
                    .next()
                    .and_then(|head| head.split_whitespace().last())
                    .unwrap_or("");
                if !(taken.contains('=') && known(name)) {
                    out.push_str(&taken);
                }
            }
            _ => {}
        }
    }
    out.push_str(&statement);
    out
}

fn drop_ellipses(body: &str) -> String {
    body.lines()
        .filter(|l| l.trim() != "...")
        .collect::<Vec<_>>()
        .join("\n")
}

fn strip_proto_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '/' && chars.peek() == Some(&'/') {
            for c in chars.by_ref() {
                if c == '\n' {
                    out.push('\n');
                    break;
                }
            }
        } else if c == '/' && chars.peek() == Some(&'*') {
            chars.next();
            let mut prev = ' ';
            for c in chars.by_ref() {
                if prev == '*' && c == '/' {
                    break;
                }
                prev = c;
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Which comment syntax a scan follows.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Syntax {
    /// Protobuf text format: `#` comments.
    Text,
    /// `.proto` source: `//` and `/* */` comments.
    Proto,
}

/// A top-level `message NAME { ... }` / `enum NAME { ... }` of a `.proto` source.
#[derive(Debug)]
pub(crate) struct Block {
    keyword: String,
    name: String,
    start: usize,
    body_start: usize,
    body_end: usize,
    end: usize,
}

/// What one linear pass over a text finds.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// Position (line, column) of the first brace nested deeper than [`MAX_NESTING`].
    pub too_deep: Option<(usize, usize)>,
    /// Text format: the line of each top-level field, by name, in order.
    pub top_fields: HashMap<String, Vec<usize>>,
    /// `.proto`: top-level message and enum blocks.
    top_messages: Vec<Block>,
}

/// One pass over `text`: nesting depth, the lines of top-level field names (text
/// format) or the top-level blocks (`.proto`). Strings and comments are skipped;
/// malformed text is left to the real parser.
pub(crate) fn scan(text: &str, syntax: Syntax) -> Scan {
    let b = text.as_bytes();
    let mut out = Scan::default();
    let (mut i, mut line, mut line_start) = (0usize, 1usize, 0usize);
    let mut depth = 0usize;
    // For .proto: the last two identifiers at depth 0 and where the first began.
    let mut idents: Vec<(usize, usize)> = Vec::new();
    let mut open: Option<(String, String, usize, usize)> = None;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\n' => {
                line += 1;
                line_start = i + 1;
                i += 1;
            }
            b'#' if syntax == Syntax::Text => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if syntax == Syntax::Proto && b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if syntax == Syntax::Proto && b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                    if b[i] == b'\n' {
                        line += 1;
                        line_start = i + 1;
                    }
                    i += 1;
                }
                i += 2;
            }
            b'"' | b'\'' => {
                i += 1;
                while i < b.len() && b[i] != c && b[i] != b'\n' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'{' | b'<' if c == b'{' || syntax == Syntax::Text => {
                if depth == 0 && syntax == Syntax::Proto && idents.len() >= 2 {
                    let (ks, ke) = idents[idents.len() - 2];
                    let (ns, ne) = idents[idents.len() - 1];
                    let kw = &text[ks..ke];
                    if kw == "message" || kw == "enum" {
                        open = Some((kw.to_string(), text[ns..ne].to_string(), ks, i + 1));
                    }
                }
                idents.clear();
                depth += 1;
                if depth > MAX_NESTING && out.too_deep.is_none() {
                    out.too_deep = Some((line, column(text, line_start, i)));
                    return out;
                }
                i += 1;
            }
            b'}' | b'>' if c == b'}' || syntax == Syntax::Text => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    if let Some((keyword, name, start, body_start)) = open.take() {
                        out.top_messages.push(Block {
                            keyword,
                            name,
                            start,
                            body_start,
                            body_end: i,
                            end: i + 1,
                        });
                    }
                }
                idents.clear();
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.')
                {
                    i += 1;
                }
                if depth == 0 {
                    match syntax {
                        Syntax::Text => {
                            // A field name is followed by ':' or a block opener.
                            let mut j = i;
                            while j < b.len() && (b[j] == b' ' || b[j] == b'\t' || b[j] == b'\r') {
                                j += 1;
                            }
                            if j < b.len() && matches!(b[j], b':' | b'{' | b'<') {
                                out.top_fields
                                    .entry(text[start..i].to_string())
                                    .or_default()
                                    .push(line);
                            }
                            // Skip a value identifier (enum name) after ':'.
                        }
                        Syntax::Proto => idents.push((start, i)),
                    }
                }
            }
            b':' if syntax == Syntax::Text => {
                // Skip the value (scalar identifiers such as enum names are not fields).
                i += 1;
                while i < b.len() && (b[i] == b' ' || b[i] == b'\t' || b[i] == b'\r') {
                    i += 1;
                }
                if i < b.len() && (b[i].is_ascii_alphabetic() || b[i] == b'_') {
                    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                        i += 1;
                    }
                }
            }
            _ => i += 1,
        }
    }
    out
}

/// 1-based column of byte `at` on the line starting at `line_start` (in characters).
fn column(text: &str, line_start: usize, at: usize) -> usize {
    text.get(line_start..at)
        .map(|s| s.chars().count())
        .unwrap_or(0)
        + 1
}

/// 1-based (line, column) of byte offset `at`.
pub(crate) fn line_col(text: &str, at: usize) -> (usize, usize) {
    let at = at.min(text.len());
    let before = &text.as_bytes()[..at];
    let line = before.iter().filter(|&&c| c == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(0, |p| p + 1);
    let mut start = line_start;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let mut end = at;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (line, column(text, start, end.max(start)))
}

/// A parsed prototxt: the dynamic NetParameter and the scan of its text.
pub(crate) struct Parsed {
    pub message: DynamicMessage,
    pub scan: Scan,
}

/// `text` without a leading UTF-8 byte order mark.
fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Parses `text` as a `caffe.NetParameter` of `schema`.
pub(crate) fn parse_text(text: &str, schema: &Schema, limits: &Limits) -> Result<Parsed> {
    // A UTF-8 byte order mark (Windows editors write one) is not text.
    let text = strip_bom(text);
    let estimate = (text.len() as u64).saturating_mul(PROTOTXT_ALLOC_FACTOR);
    if limits.check_alloc(estimate).is_err() {
        return Err(CaffeError::Limit {
            path: "prototxt".into(),
            offset: 0,
            what: "allocation",
            value: estimate,
            limit: limits.max_alloc,
        });
    }
    let scan = scan(text, Syntax::Text);
    // The layer count, from the scan, before any layer is parsed (each parsed layer
    // costs kilobytes: a net of a million layers must cost no more than its text).
    let layer_lines = |f: &str| scan.top_fields.get(f).map_or(&[][..], Vec::as_slice);
    let (v2, v1) = (layer_lines("layer"), layer_lines("layers"));
    let count = (v2.len() as u64).saturating_add(v1.len() as u64);
    for (what, limit) in [
        ("layer count", limits.max_layers),
        ("item count", limits.max_items),
    ] {
        if count > limit {
            return Err(CaffeError::Limit {
                path: "NetParameter.layer".into(),
                offset: 0,
                what,
                value: count,
                limit,
            });
        }
    }
    if let Some((line, column)) = scan.too_deep {
        return Err(CaffeError::Prototxt {
            line,
            column,
            message: format!("nested deeper than {MAX_NESTING} levels"),
        });
    }
    let message = DynamicMessage::parse_text_format(schema.net_descriptor().clone(), text)
        .map_err(|e| map_parse_error(&e, text, schema))?;
    check_enums(&message, text)?;
    Ok(Parsed { message, scan })
}

/// Refuses an enum field given as a number its enum does not define (`pool: 7`):
/// protobuf's C++ text parser, which Caffe and OpenCV use, refuses it ("Unknown
/// enumeration value"); prost-reflect keeps the number, which would read as the
/// field's default.
fn check_enums(message: &DynamicMessage, text: &str) -> Result<()> {
    fn one(field: &prost_reflect::FieldDescriptor, v: &Value, text: &str) -> Result<()> {
        match (v, field.kind()) {
            (Value::EnumNumber(n), Kind::Enum(e)) if e.get_value(*n).is_none() => {
                let names: Vec<String> = e.values().map(|v| v.name().to_string()).collect();
                let at = find_setting(text, field.name(), &n.to_string()).unwrap_or(text.len());
                let (line, column) = line_col(text, at);
                Err(CaffeError::Prototxt {
                    line,
                    column,
                    message: format!(
                        "unknown enumeration value {n} for field {:?} ({}: {})",
                        field.name(),
                        e.name(),
                        names.join(", ")
                    ),
                })
            }
            (Value::Message(m), _) => check_enums(m, text),
            (Value::List(items), _) => items.iter().try_for_each(|i| one(field, i, text)),
            _ => Ok(()),
        }
    }
    for (field, v) in message.fields() {
        one(&field, v, text)?;
    }
    Ok(())
}

/// Where `name: value` is written in `text` (for the error's line), if it can be found.
fn find_setting(text: &str, name: &str, value: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find(name) {
        let at = from + i;
        let rest = text[at + name.len()..].trim_start();
        if let Some(rest) = rest.strip_prefix(':') {
            if rest.trim_start().starts_with(value) {
                return Some(at);
            }
        }
        from = at + name.len();
    }
    None
}

fn map_parse_error(
    e: &prost_reflect::text_format::ParseError,
    text: &str,
    schema: &Schema,
) -> CaffeError {
    use miette::Diagnostic;
    let offset = e
        .labels()
        .and_then(|mut l| l.next())
        .map(|l| l.offset())
        .unwrap_or(text.len());
    let (line, column) = line_col(text, offset);
    let message = e.to_string();
    if let Some(rest) = message.strip_prefix("field '") {
        if let Some((field, rest)) = rest.split_once("' not found for message '") {
            let msg = rest.trim_end_matches('\'');
            return CaffeError::UnknownField {
                field: field.to_string(),
                message: msg.strip_prefix("caffe.").unwrap_or(msg).to_string(),
                line,
                column,
                schema: schema.origin().to_string(),
                builtin: schema.is_builtin(),
            };
        }
    }
    CaffeError::Prototxt {
        line,
        column,
        message,
    }
}

/// Converts a message parsed with any schema into the builtin typed struct `T`: a
/// builtin-schema message is transcoded directly; a fork-schema message is first
/// translated field by field, by name, into the builtin message `builtin_name`
/// (fields the builtin schema lacks or types differently are left out of `T`; they stay
/// readable through [`crate::LayerDef::fork_field`]).
pub(crate) fn to_typed<T: prost::Message + Default>(
    message: &DynamicMessage,
    schema: &Schema,
    builtin_name: &str,
    path: &str,
) -> Result<T> {
    let decode_err = |source| CaffeError::Prost {
        path: path.to_string(),
        source,
    };
    if schema.is_builtin() {
        return message.transcode_to::<T>().map_err(decode_err);
    }
    let target = Schema::builtin()
        .pool
        .get_message_by_name(&format!("caffe.{builtin_name}"))
        .expect("builtin message exists");
    translate(message, &target)
        .transcode_to::<T>()
        .map_err(decode_err)
}

fn translate(src: &DynamicMessage, target: &MessageDescriptor) -> DynamicMessage {
    let mut out = DynamicMessage::new(target.clone());
    for (field, value) in src.fields() {
        let Some(tf) = target.get_field_by_name(field.name()) else {
            continue;
        };
        if tf.is_map() || field.is_map() {
            continue;
        }
        let src_kind = field.kind();
        let converted = match value {
            Value::List(items) => {
                let items: Vec<Value> = items
                    .iter()
                    .filter_map(|v| convert(v, &src_kind, &tf.kind()))
                    .collect();
                if tf.is_list() {
                    Some(Value::List(items))
                } else {
                    items.into_iter().last()
                }
            }
            v => convert(v, &src_kind, &tf.kind()).map(|v| {
                if tf.is_list() {
                    Value::List(vec![v])
                } else {
                    v
                }
            }),
        };
        if let Some(v) = converted {
            if v.is_valid_for_field(&tf) {
                out.set_field(&tf, v);
            }
        }
    }
    out
}

fn convert(value: &Value, src: &Kind, target: &Kind) -> Option<Value> {
    match (value, src, target) {
        (Value::Message(m), _, Kind::Message(md)) => Some(Value::Message(translate(m, md))),
        (Value::EnumNumber(n), Kind::Enum(se), Kind::Enum(te)) => {
            let name = se.get_value(*n)?.name().to_string();
            Some(Value::EnumNumber(te.get_value_by_name(&name)?.number()))
        }
        (Value::Message(_) | Value::EnumNumber(_), _, _) => None,
        (v, _, _) => Some(v.clone()),
    }
}

/// A parameter value read through a (fork) schema: see [`crate::LayerDef::fork_field`].
#[derive(Debug, Clone, PartialEq)]
pub enum ForkValue {
    /// `bool`.
    Bool(bool),
    /// Any signed integer type.
    Int(i64),
    /// Any unsigned integer type.
    UInt(u64),
    /// `float` or `double`.
    Float(f64),
    /// `string` (or `bytes`, lossily).
    Str(String),
    /// An enum value: its name and number.
    Enum(String, i32),
    /// A repeated field.
    List(Vec<ForkValue>),
    /// A nested message: its set fields by name.
    Message(Vec<(String, ForkValue)>),
}

impl ForkValue {
    /// The value as f64 (numbers and bools), or the last element of a list.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            ForkValue::Bool(b) => Some(f64::from(u8::from(*b))),
            ForkValue::Int(v) => Some(*v as f64),
            ForkValue::UInt(v) => Some(*v as f64),
            ForkValue::Float(v) => Some(*v),
            ForkValue::Enum(_, n) => Some(f64::from(*n)),
            ForkValue::List(l) => l.last().and_then(ForkValue::as_f64),
            _ => None,
        }
    }

    /// The value as i64 when it is an integer (or a bool, an enum number, an integral
    /// float).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            ForkValue::Bool(b) => Some(i64::from(*b)),
            ForkValue::Int(v) => Some(*v),
            ForkValue::UInt(v) => i64::try_from(*v).ok(),
            ForkValue::Float(v) if v.fract() == 0.0 && v.abs() < 9.0e15 => Some(*v as i64),
            ForkValue::Enum(_, n) => Some(i64::from(*n)),
            ForkValue::List(l) => l.last().and_then(ForkValue::as_i64),
            _ => None,
        }
    }

    /// The value as a bool (non-zero numbers are true).
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            ForkValue::Bool(b) => Some(*b),
            ForkValue::Str(_) | ForkValue::Message(_) => None,
            other => other.as_f64().map(|v| v != 0.0),
        }
    }

    /// The enum value name, or the string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            ForkValue::Str(s) | ForkValue::Enum(s, _) => Some(s),
            _ => None,
        }
    }
}

pub(crate) fn fork_value(value: &Value, kind: &Kind) -> ForkValue {
    match value {
        Value::Bool(b) => ForkValue::Bool(*b),
        Value::I32(v) => ForkValue::Int(i64::from(*v)),
        Value::I64(v) => ForkValue::Int(*v),
        Value::U32(v) => ForkValue::UInt(u64::from(*v)),
        Value::U64(v) => ForkValue::UInt(*v),
        Value::F32(v) => ForkValue::Float(f64::from(*v)),
        Value::F64(v) => ForkValue::Float(*v),
        Value::String(s) => ForkValue::Str(s.clone()),
        Value::Bytes(b) => ForkValue::Str(String::from_utf8_lossy(b).into_owned()),
        Value::EnumNumber(n) => {
            let name = match kind {
                Kind::Enum(e) => e.get_value(*n).map(|v| v.name().to_string()),
                _ => None,
            };
            ForkValue::Enum(name.unwrap_or_else(|| n.to_string()), *n)
        }
        Value::Message(m) => ForkValue::Message(
            m.fields()
                .map(|(f, v)| (f.name().to_string(), fork_value(v, &f.kind())))
                .collect(),
        ),
        Value::List(items) => ForkValue::List(items.iter().map(|v| fork_value(v, kind)).collect()),
        Value::Map(_) => ForkValue::List(Vec::new()),
    }
}

/// Prototxt bytes as text. Caffe's text parser (protobuf's) skips a `#` comment byte by
/// byte, so a comment in another encoding (GBK or Latin-1 from a Windows editor) does
/// not stop it: such a comment is decoded lossily here; bytes that are not UTF-8
/// outside a comment are an error naming the line and column.
///
/// ```
/// let mut text = b"# \xbc\xec\xb2\xe2 (GBK)\nname: \"net\"\n".to_vec();
/// assert_eq!(tensorfmt_caffe::prototxt_text(&text)?.lines().nth(1), Some("name: \"net\""));
/// text.extend_from_slice(b"name: \"\xe9\"\n");
/// let e = tensorfmt_caffe::prototxt_text(&text).unwrap_err();
/// assert_eq!(e, "line 3, column 8: the text is not UTF-8 (outside a # comment)");
/// # Ok::<(), String>(())
/// ```
pub fn prototxt_text(bytes: &[u8]) -> std::result::Result<String, String> {
    if let Ok(s) = std::str::from_utf8(bytes) {
        return Ok(s.to_string());
    }
    let mut out = String::with_capacity(bytes.len());
    for (n, line) in bytes.split_inclusive(|&b| b == b'\n').enumerate() {
        let bad = match std::str::from_utf8(line) {
            Ok(s) => {
                out.push_str(s);
                continue;
            }
            Err(e) => e.valid_up_to(),
        };
        // Where a comment starts: the first `#` outside a quoted string.
        let (mut quote, mut escaped, mut comment) = (None, false, None);
        for (i, &b) in line.iter().enumerate() {
            match (quote, b) {
                (Some(_), _) if escaped => escaped = false,
                (Some(_), b'\\') => escaped = true,
                (Some(q), b) if b == q => quote = None,
                (Some(_), _) => {}
                (None, b'"' | b'\'') => quote = Some(b),
                (None, b'#') => {
                    comment = Some(i);
                    break;
                }
                _ => {}
            }
        }
        match comment {
            Some(c) if bad >= c => {
                out.push_str(std::str::from_utf8(&line[..c]).unwrap_or_default());
                out.push_str(&String::from_utf8_lossy(&line[c..]));
            }
            _ => {
                return Err(format!(
                    "line {}, column {}: the text is not UTF-8 (outside a # comment)",
                    n + 1,
                    bad + 1
                ))
            }
        }
    }
    Ok(out)
}
