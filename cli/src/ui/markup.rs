//! The console's HTML building blocks: escaping, the links between its pages, and the
//! page around every body. Everything that comes from the store or the request goes
//! through [`esc`] (text and attributes) or [`url_part`] (links): an execution's id,
//! context or event data is never markup.

/// `text` safe in HTML text and in a quoted attribute.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

pub(crate) use crate::percent::url_part;

/// The link to execution `id`'s page.
pub(crate) fn execution_href(id: &str) -> String {
    format!("/executions/{}", url_part(id))
}

/// The href of machine `name`'s page.
pub(crate) fn machine_href(name: &str) -> String {
    format!("/machines/{}", url_part(name))
}

/// The href of the list of machine `name`'s executions in state `path`.
pub(crate) fn in_state_href(name: &str, path: &str) -> String {
    format!("/machines/{}/in/{}", url_part(name), url_part(path))
}

/// A whole page: the built-in stylesheet and script, a header linking home, `body`.
pub(crate) fn page(title: &str, body: &str) -> String {
    format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · stm ui</title>
<link rel="stylesheet" href="/assets/console.css">
<script src="/assets/console.js" defer></script>
</head><body>
<header><a class="home" href="/">stm ui</a> <span class="muted">durable statecharts console</span></header>
<main>
{body}
</main></body></html>
"#,
        title = esc(title)
    )
}

/// A page for a failure: one sentence, and the way back.
pub(crate) fn error_page(title: &str, message: &str) -> String {
    page(
        title,
        &format!(
            r#"<h1>{}</h1><p class="error" id="error">{}</p><p><a href="/">Back to the executions</a></p>"#,
            esc(title),
            esc(message)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_from_the_store_is_text() {
        assert_eq!(
            esc(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn ids_are_one_path_segment() {
        assert_eq!(url_part("o-1_a.b~"), "o-1_a.b~");
        assert_eq!(execution_href("a/b?c#d&e f"), "/executions/a%2Fb%3Fc%23d%26e%20f");
    }
}
