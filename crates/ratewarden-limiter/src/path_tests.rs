use proptest::prelude::*;

use super::*;

fn normal(path: &str) -> String {
    match normalise_path(path) {
        Ok(p) => p.into_owned(),
        Err(e) => panic!("{path:?} was refused: {e}"),
    }
}

fn refused(path: &str) -> PathError {
    match normalise_path(path) {
        Ok(p) => panic!("{path:?} was accepted as {p:?}"),
        Err(e) => e,
    }
}

/// Every escape decoded: how a server that decodes the whole path once
/// reads it.
fn decoded(path: &str) -> Vec<u8> {
    let bytes = path.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match escape_at(bytes, i) {
            Some(d) if bytes[i] == b'%' => {
                out.push(d);
                i += 3;
            }
            _ => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    out
}

/// nginx's `$uri` (with `merge_slashes on`, its default), written from
/// its documented behaviour and checked against the recorded answers of
/// nginx 1.22.1 below: the whole path percent-decoded (`%2F` is a `/`; a
/// malformed escape or an encoded NUL is a 400), slashes merged, then dot
/// segments removed (`..` above the root is a 400). `None` for a 400.
fn nginx_uri(path: &str) -> Option<Vec<u8>> {
    let bytes = path.as_bytes();
    let mut plain = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let d = escape_at(bytes, i).filter(|&d| d != 0)?;
            plain.push(d);
            i += 3;
        } else {
            plain.push(bytes[i]);
            i += 1;
        }
    }
    let segments: Vec<&[u8]> = plain.get(1..)?.split(|&b| b == b'/').collect();
    let mut out: Vec<&[u8]> = Vec::new();
    let mut trailing = false;
    for (n, segment) in segments.iter().enumerate() {
        trailing = n + 1 == segments.len();
        match *segment {
            b"" | b"." => {}
            b".." => {
                out.pop()?;
            }
            other => {
                out.push(other);
                trailing = false;
            }
        }
    }
    let mut uri = Vec::new();
    for segment in &out {
        uri.push(b'/');
        uri.extend_from_slice(segment);
    }
    if trailing || out.is_empty() {
        uri.push(b'/');
    }
    Some(uri)
}

/// `$uri` of nginx 1.22.1 (Debian bookworm, `merge_slashes on`) for each
/// request path, `None` where it answered 400: recorded from
/// `location / { return 200 "$uri"; }` with each path sent as is.
const NGINX_1_22: &[(&str, Option<&[u8]>)] = &[
    ("/", Some(b"/")),
    ("/api/orders", Some(b"/api/orders")),
    ("/%61pi/orders", Some(b"/api/orders")),
    ("//api//orders", Some(b"/api/orders")),
    ("/x/../api/orders", Some(b"/api/orders")),
    ("/api/%2e%2e/api/x", Some(b"/api/x")),
    ("/a/.%2e/b", Some(b"/b")),
    ("/a/%2E/b", Some(b"/a/b")),
    ("/api%2Forders", Some(b"/api/orders")),
    ("/api%2F..%2Fx", Some(b"/x")),
    ("/a%2F%2Fb", Some(b"/a/b")),
    ("/a/..%2Fb", Some(b"/b")),
    ("/a//../b", Some(b"/b")),
    ("/a/..//b", Some(b"/b")),
    ("/a/b/..", Some(b"/a/")),
    ("/a/b/.", Some(b"/a/b/")),
    ("/a/.", Some(b"/a/")),
    ("/a/..", Some(b"/")),
    ("/..", None),
    ("/../x", None),
    ("/a/b/../../..", None),
    ("/./a", Some(b"/a")),
    ("/.", Some(b"/")),
    ("/.a", Some(b"/.a")),
    ("/..a", Some(b"/..a")),
    ("/a/...", Some(b"/a/...")),
    ("/a%2eb", Some(b"/a.b")),
    ("/%7e%7E", Some(b"/~~")),
    ("/a%3Fb", Some(b"/a?b")),
    ("/a%25b", Some(b"/a%b")),
    ("/a%252e%252e", Some(b"/a%2e%2e")),
    ("/a%20b", Some(b"/a b")),
    ("/a%c3%a9", Some(b"/a\xc3\xa9")),
    ("/a%C3%A9", Some(b"/a\xc3\xa9")),
    ("/caf%C3%A9/x", Some(b"/caf\xc3\xa9/x")),
    ("/a%ffb", Some(b"/a\xffb")),
    ("/a%3Ab%40c", Some(b"/a:b@c")),
    ("/a%21%24%26%27%28%29%2A%2B%2C%3D", Some(b"/a!$&'()*+,=")),
    ("/a%7Bb", Some(b"/a{b")),
    ("/a%5Bb%5D", Some(b"/a[b]")),
    ("/a%22b", Some(b"/a\x22b")),
    ("/a%00b", None),
    ("/a%zz", None),
    ("/a%", None),
    ("/a%4", None),
    ("/a%0db", Some(b"/a\x0db")),
    ("/a%7fb", Some(b"/a\x7fb")),
    ("/a%5Cb", Some(b"/a\x5cb")),
    ("/a%5cb", Some(b"/a\x5cb")),
    ("/a//", Some(b"/a/")),
    ("//", Some(b"/")),
    ("///", Some(b"/")),
    ("/a/b//c/./d/../e", Some(b"/a/b/c/e")),
];

#[test]
fn the_nginx_model_gives_what_nginx_gave() {
    for &(path, uri) in NGINX_1_22 {
        assert_eq!(nginx_uri(path).as_deref(), uri, "{path}");
    }
}

#[test]
fn what_nginx_refuses_is_refused_and_what_is_accepted_decodes_to_nginxs_uri() {
    for &(path, uri) in NGINX_1_22 {
        match (normalise_path(path), uri) {
            (Ok(ours), Some(uri)) => assert_eq!(decoded(&ours), uri, "{path} gave {ours}"),
            (Ok(ours), None) => panic!("{path}: nginx refuses it, we gave {ours}"),
            (Err(_), _) => {}
        }
    }
}

#[test]
fn the_spellings_of_one_path_are_one_path() {
    for spelling in [
        "/api/orders",
        "/%61pi/orders",
        "/%61%70%69/%6F%72%64%65%72%73",
        "//api//orders",
        "/api/orders//",
        "/x/../api/orders",
        "/./api/./orders",
        "/api/x/y/../../orders",
        "/api%2Forders",
        "/api;v=1/orders",
        "/api/orders;jsessionid=0A1B",
    ] {
        let expected = if spelling.ends_with("//") {
            "/api/orders/"
        } else {
            "/api/orders"
        };
        assert_eq!(normal(spelling), expected, "{spelling}");
    }
}

#[test]
fn normal_paths_are_borrowed_not_copied() {
    for path in [
        "/",
        "/api/orders",
        "/api/orders/",
        "/a.b/..c/...",
        "/caf%C3%A9",
        "/100%25",
        "/q%3Fx",
        "/users/me:batchGet",
        "/a!$&'()*+,=:@~_-",
        "*",
        "",
    ] {
        assert!(
            matches!(normalise_path(path), Ok(Cow::Borrowed(p)) if p == path),
            "{path}"
        );
    }
}

#[test]
fn escapes_of_characters_that_mean_the_same_raw_are_decoded_and_the_rest_uppercased() {
    assert_eq!(normal("/%7e%2D%2e%5F"), "/~-._");
    assert_eq!(normal("/a%3Ab%40c%21%2a"), "/a:b@c!*");
    assert_eq!(normal("/caf%c3%a9"), "/caf%C3%A9");
    assert_eq!(normal("/100%25"), "/100%25");
    assert_eq!(normal("/a%252e%252e/b"), "/a%252e%252e/b");
    assert_eq!(normal("/a%3fb%23c"), "/a%3Fb%23c");
    assert_eq!(normal("/a%20b"), "/a%20b");
}

#[test]
fn raw_characters_a_path_may_not_hold_are_encoded_as_their_escapes_are() {
    assert_eq!(normal("/a{b}"), normal("/a%7bb%7D"));
    assert_eq!(normal("/a{b}"), "/a%7Bb%7D");
    assert_eq!(normal("/\"|^`[]"), "/%22%7C%5E%60%5B%5D");
    assert_eq!(normal("/café"), "/caf%C3%A9");
    assert_eq!(normal("/a b"), "/a%20b");
    assert_eq!(normal("/a?b#c"), "/a%3Fb%23c");
}

#[test]
fn an_encoded_slash_separates_segments() {
    assert_eq!(normal("/api%2Forders"), "/api/orders");
    assert_eq!(normal("/api%2f%2Forders"), "/api/orders");
    assert_eq!(normal("/files/a%2Fb%2F"), "/files/a/b/");
}

#[test]
fn segment_parameters_are_dropped() {
    assert_eq!(normal("/login;jsessionid=1"), "/login");
    assert_eq!(normal("/a;x=1;y=2/b;z"), "/a/b");
    assert_eq!(normal("/login%3Bx"), "/login");
    assert_eq!(normal("/;x/api"), "/api");
    assert_eq!(normal("/a/;x"), "/a/");
    assert_eq!(normal("/a;x/../b"), "/b");
}

#[test]
fn dot_segments_are_removed_after_slashes_are_merged_as_nginx_does() {
    assert_eq!(normal("/a//../b"), "/b");
    assert_eq!(normal("/a/..//b"), "/b");
    assert_eq!(normal("/a/b/.."), "/a/");
    assert_eq!(normal("/a/b/."), "/a/b/");
    assert_eq!(normal("/a/.."), "/");
    assert_eq!(normal("/."), "/");
    assert_eq!(normal("/.a/..b/.../b."), "/.a/..b/.../b.");
}

#[test]
fn ambiguous_paths_are_refused_with_the_reason() {
    assert_eq!(refused("api/x"), PathError::NotAbsolute);
    assert_eq!(refused("/a%zz"), PathError::MalformedEscape { at: 2 });
    assert_eq!(refused("/a%4"), PathError::MalformedEscape { at: 2 });
    assert_eq!(refused("/a%"), PathError::MalformedEscape { at: 2 });
    assert_eq!(refused("/a%00b"), PathError::ControlCharacter(0));
    assert_eq!(refused("/a%0d%0a"), PathError::ControlCharacter(0x0D));
    assert_eq!(refused("/a%7F"), PathError::ControlCharacter(0x7F));
    assert_eq!(refused("/a\tb"), PathError::ControlCharacter(b'\t'));
    assert_eq!(refused("/a\\b"), PathError::Backslash);
    assert_eq!(refused("/a%5cb"), PathError::Backslash);
    assert_eq!(refused("/..%5C..%5Cwin.ini"), PathError::Backslash);
    for encoded_dots in [
        "/api/%2e%2e/x",
        "/api/%2E/x",
        "/api/.%2e/x",
        "/api/%2e./x",
        "/api%2F..%2Fx",
        "/a/..%2Fb",
        "/%61pi/x/../../public",
        "/caf%C3%A9/../x",
    ] {
        assert_eq!(
            refused(encoded_dots),
            PathError::DotSegmentWithEscape,
            "{encoded_dots}"
        );
    }
    assert_eq!(
        refused("/public/..;/admin"),
        PathError::DotSegmentWithParameters
    );
    assert_eq!(refused("/a/.;x/b"), PathError::DotSegmentWithParameters);
    assert_eq!(refused("/.."), PathError::AboveRoot);
    assert_eq!(refused("/a/../.."), PathError::AboveRoot);
    assert_eq!(refused("/../etc/passwd"), PathError::AboveRoot);
}

#[test]
fn errors_say_why() {
    let text = PathError::DotSegmentWithEscape.to_string();
    assert!(text.contains("%2e%2e"), "{text}");
    let text = PathError::MalformedEscape { at: 7 }.to_string();
    assert!(text.contains("byte 7"), "{text}");
    let text = PathError::ControlCharacter(0).to_string();
    assert!(text.contains("0x00"), "{text}");
}

/// Paths built from the pieces that make normalisation interesting.
fn path_of_pieces() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "/", "//", "a", "b", "api", ".", "..", "...", "%2e", "%2E", "%2e%2e", "%61", "%7e", "%2F",
        "%2f", "%3F", "%3f", "%25", "%20", "%c3%a9", "%C3%A9", "é", "~", "{", "%7B", "!", "%21",
        ":", "%40", "+", "*", "[", "%5B", "%", "%4", "%zz", "%00", "%0A", "\\", "%5C", ";", "%3B",
        "=", "?", "\"",
    ]);
    prop::collection::vec(piece, 0..12).prop_map(|pieces| format!("/{}", pieces.concat()))
}

fn segments(path: &str) -> Vec<&str> {
    path[1..].split('/').collect()
}

fn has_encoded_decodable(path: &str) -> bool {
    let bytes = path.as_bytes();
    (0..bytes.len()).any(|i| {
        bytes[i] == b'%'
            && escape_at(bytes, i)
                .is_some_and(|d| !matches!(class(d), Class::Encoded | Class::Percent))
    })
}

fn check_invariants(path: &str) -> Result<(), TestCaseError> {
    let Ok(ours) = normalise_path(path) else {
        return Ok(());
    };
    prop_assert!(ours.is_ascii(), "{path:?} gave {ours:?}");
    prop_assert!(ours.starts_with('/'), "{path:?} gave {ours:?}");
    let segs = segments(&ours);
    let last = segs.len() - 1;
    for (n, segment) in segs.iter().enumerate() {
        prop_assert!(
            *segment != "." && *segment != "..",
            "{path:?} gave {ours:?}"
        );
        prop_assert!(n == last || !segment.is_empty(), "{path:?} gave {ours:?}");
    }
    prop_assert!(!ours.contains("//"), "{path:?} gave {ours:?}");
    prop_assert!(
        !ours.contains(';') && !ours.contains('\\'),
        "{path:?} gave {ours:?}"
    );
    prop_assert!(!has_encoded_decodable(&ours), "{path:?} gave {ours:?}");
    prop_assert!(
        ours.bytes().all(|b| b.is_ascii_graphic()),
        "{path:?} gave {ours:?}"
    );
    let again = normalise_path(&ours);
    prop_assert!(
        matches!(&again, Ok(Cow::Borrowed(p)) if *p == ours),
        "not idempotent: {path:?} gave {ours:?}, then {again:?}"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn normal_paths_are_fixed_points_without_dot_double_slash_or_decodable_escapes(
        path in path_of_pieces()
    ) {
        check_invariants(&path)?;
    }

    #[test]
    fn any_text_is_normalised_or_refused_without_a_panic(path in "/\\PC{0,40}") {
        check_invariants(&path)?;
    }

    #[test]
    fn what_is_accepted_decodes_to_nginxs_uri_and_what_nginx_refuses_is_refused(
        path in path_of_pieces().prop_filter("nginx keeps ';'", |p| !p.contains(';') && !p.contains("%3B"))
    ) {
        match (normalise_path(&path), nginx_uri(&path)) {
            (Ok(ours), Some(uri)) => prop_assert_eq!(decoded(&ours), uri, "{:?} gave {:?}", path, ours),
            (Ok(ours), None) => prop_assert!(false, "nginx refuses {:?}, we gave {:?}", path, ours),
            (Err(_), _) => {}
        }
    }

    #[test]
    fn a_path_already_normal_is_borrowed(path in path_of_pieces()) {
        if let Ok(ours) = normalise_path(&path) {
            prop_assert_eq!(is_normal(&path), ours == path);
        }
    }
}
