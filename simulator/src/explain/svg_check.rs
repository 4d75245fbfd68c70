//! Checks on a picture as a person sees it: the SVG is rendered to pixels with resvg and the
//! tests assert what a reader would notice at a glance: something drawn past the canvas's
//! edge, a label that does not stand out from what lies under it, two labels on top of each
//! other. The text is laid out with Hack, a monospaced font shipped inside a crate: no system
//! font is needed, and its glyphs are at least as wide as those of the usual sans-serif
//! fonts, so a label that fits here fits in a browser too.
//!
//! Used by the simulator's picture tests and, through `#[path]`, by the benchmarks' report.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use resvg::tiny_skia::{Pixmap, Transform};
use resvg::usvg::{self, Node, Paint};

/// A rendered picture: its tree (what was drawn, with bounding boxes) and two rasters, with
/// and without the text (the second tells what lies under each label).
pub struct Rendered {
    pub tree: usvg::Tree,
    pub pixels: Pixmap,
    pub without_text: Pixmap,
}

fn options() -> usvg::Options<'static> {
    let mut options = usvg::Options::default();
    let fonts = Arc::make_mut(&mut options.fontdb);
    fonts.load_font_data(epaint_default_fonts::HACK_REGULAR.to_vec());
    fonts.set_sans_serif_family("Hack");
    options.font_family = "Hack".into();
    options
}

fn rasterize(tree: &usvg::Tree) -> Pixmap {
    let size = tree.size().to_int_size();
    let mut pixmap = Pixmap::new(size.width(), size.height()).expect("a canvas of some size");
    pixmap.fill(resvg::tiny_skia::Color::WHITE);
    resvg::render(tree, Transform::default(), &mut pixmap.as_mut());
    pixmap
}

/// The SVG without its `<text>` elements.
fn strip_text(svg: &str) -> String {
    let mut out = String::with_capacity(svg.len());
    let mut rest = svg;
    while let Some(start) = rest.find("<text") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("</text>").expect("every text is closed");
        rest = &rest[start + end + "</text>".len()..];
    }
    out.push_str(rest);
    out
}

/// Renders `svg`; panics when it does not parse.
pub fn render(svg: &str) -> Rendered {
    let options = options();
    let tree = usvg::Tree::from_str(svg, &options).expect("the SVG parses");
    let bare = usvg::Tree::from_str(&strip_text(svg), &options).expect("the SVG parses");
    Rendered {
        pixels: rasterize(&tree),
        without_text: rasterize(&bare),
        tree,
    }
}

/// Every drawn element, in drawing order (groups opened).
fn leaves(group: &usvg::Group, out: &mut Vec<Node>) {
    for node in group.children() {
        match node {
            Node::Group(g) => leaves(g, out),
            other => out.push(other.clone()),
        }
    }
}

impl Rendered {
    pub fn width(&self) -> u32 {
        self.pixels.width()
    }

    pub fn height(&self) -> u32 {
        self.pixels.height()
    }

    /// The colour of the pixel at (x, y).
    pub fn rgb(&self, x: u32, y: u32) -> [u8; 3] {
        let p = self.pixels.pixel(x, y).expect("a pixel on the canvas");
        let p = p.demultiply();
        [p.red(), p.green(), p.blue()]
    }

    fn rgb_without_text(&self, x: u32, y: u32) -> [u8; 3] {
        let p = self
            .without_text
            .pixel(x, y)
            .expect("a pixel on the canvas");
        let p = p.demultiply();
        [p.red(), p.green(), p.blue()]
    }

    /// The texts, each with its glyphs' box and its fill.
    pub fn texts(&self) -> Vec<(String, usvg::Rect, [u8; 3])> {
        let mut nodes = Vec::new();
        leaves(self.tree.root(), &mut nodes);
        nodes
            .iter()
            .filter_map(|node| match node {
                Node::Text(text) => {
                    let label: String = text.chunks().iter().map(|c| c.text()).collect();
                    let fill = text
                        .chunks()
                        .iter()
                        .flat_map(|c| c.spans())
                        .find_map(|s| s.fill())
                        .map_or([0, 0, 0], |f| match f.paint() {
                            Paint::Color(c) => [c.red, c.green, c.blue],
                            _ => [0, 0, 0],
                        });
                    Some((label, text.flattened().abs_bounding_box(), fill))
                }
                _ => None,
            })
            .collect()
    }

    /// Panics when an element reaches past the canvas (by more than half a pixel, the
    /// anti-aliasing of a line on the edge).
    pub fn assert_inside_canvas(&self) {
        let (w, h) = (self.tree.size().width(), self.tree.size().height());
        let mut nodes = Vec::new();
        leaves(self.tree.root(), &mut nodes);
        for node in &nodes {
            let b = match node {
                Node::Text(text) => text.flattened().abs_bounding_box(),
                other => match other.abs_stroke_bounding_box() {
                    r if r.width() > 0.0 || r.height() > 0.0 => r,
                    _ => continue,
                },
            };
            let what = match node {
                Node::Text(text) => {
                    let label: String = text.chunks().iter().map(|c| c.text()).collect();
                    format!("text {label:?}")
                }
                other => format!("element {:?}", other.id()),
            };
            assert!(
                b.left() >= -0.5
                    && b.top() >= -0.5
                    && b.right() <= w + 0.5
                    && b.bottom() <= h + 0.5,
                "{what} at {b:?} reaches past the {w}×{h} canvas"
            );
        }
    }

    /// Panics when a label does not stand out from what lies under it: among the pixels
    /// of its box that have its colour (its glyphs, and the background if that has the
    /// same colour), more than a tenth lie on a background with a WCAG contrast ratio below
    /// 4.5. Thin lines crossing a label are within the tenth.
    pub fn assert_labels_readable(&self) {
        for (label, b, fill) in self.texts() {
            let (mut inked, mut poor) = (0usize, 0usize);
            let x0 = b.left().floor().max(0.0) as u32;
            let y0 = b.top().floor().max(0.0) as u32;
            let x1 = (b.right().ceil() as u32).min(self.width());
            let y1 = (b.bottom().ceil() as u32).min(self.height());
            for y in y0..y1 {
                for x in x0..x1 {
                    let shown = self.rgb(x, y);
                    let near = shown
                        .iter()
                        .zip(fill)
                        .all(|(&a, b)| (i32::from(a) - i32::from(b)).abs() <= 40);
                    if !near {
                        continue;
                    }
                    inked += 1;
                    if contrast(fill, self.rgb_without_text(x, y)) < 4.5 {
                        poor += 1;
                    }
                }
            }
            assert!(inked > 0, "the label {label:?} left no pixel of its colour");
            assert!(
                poor * 10 <= inked,
                "the label {label:?} (fill {fill:?}) at {b:?}: {poor} of its {inked} pixels lie \
                 on a background of contrast below 4.5"
            );
        }
    }

    /// Panics when two labels overlap.
    pub fn assert_labels_apart(&self) {
        let texts = self.texts();
        for (i, (a, ra, _)) in texts.iter().enumerate() {
            for (b, rb, _) in &texts[i + 1..] {
                let apart = ra.right() <= rb.left()
                    || rb.right() <= ra.left()
                    || ra.bottom() <= rb.top()
                    || rb.bottom() <= ra.top();
                assert!(
                    apart,
                    "the labels {a:?} at {ra:?} and {b:?} at {rb:?} overlap"
                );
            }
        }
    }

    /// Writes the PNG where `PICTURES_PNG_DIR` says (to look at it), else nothing.
    pub fn save_if_asked(&self, name: &str) {
        if let Ok(dir) = std::env::var("PICTURES_PNG_DIR") {
            let path = std::path::Path::new(&dir).join(format!("{name}.png"));
            self.pixels.save_png(&path).expect("the PNG is written");
        }
    }
}

/// sRGB relative luminance (WCAG 2).
fn luminance([r, g, b]: [u8; 3]) -> f64 {
    let channel = |c: u8| {
        let c = f64::from(c) / 255.0;
        if c <= 0.04045 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)
}

/// The WCAG contrast ratio of two colours, from 1 (the same) to 21 (black on white).
pub fn contrast(a: [u8; 3], b: [u8; 3]) -> f64 {
    let (la, lb) = (luminance(a), luminance(b));
    (la.max(lb) + 0.05) / (la.min(lb) + 0.05)
}

/// Whether two colours are within `tolerance` on every channel.
pub fn near(a: [u8; 3], b: [u8; 3], tolerance: u8) -> bool {
    a.iter().zip(b).all(|(&x, y)| x.abs_diff(y) <= tolerance)
}

#[test]
fn the_checks_catch_what_they_are_for() {
    // White on white, a label past the edge, two labels on top of each other: each check
    // must fail on its own fault and pass on the fixed picture.
    let bad = r##"<svg xmlns="http://www.w3.org/2000/svg" width="200" height="60" font-family="sans-serif" font-size="11">
<rect width="100%" height="100%" fill="white"/>
<rect x="10" y="10" width="3" height="14" fill="#4e79a7"/>
<text x="12" y="21" fill="white">e1 f1</text>
<text x="150" y="50">a long label</text>
</svg>"##;
    let r = render(bad);
    assert!(
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| r.assert_labels_readable()))
            .is_err()
    );
    assert!(
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| r.assert_inside_canvas()))
            .is_err()
    );
    let stacked = r##"<svg xmlns="http://www.w3.org/2000/svg" width="200" height="60" font-family="sans-serif" font-size="11">
<text x="10" y="20">one</text><text x="14" y="22">two</text></svg>"##;
    assert!(
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(
            || render(stacked).assert_labels_apart()
        ))
        .is_err()
    );
    let good = r##"<svg xmlns="http://www.w3.org/2000/svg" width="200" height="60" font-family="sans-serif" font-size="11">
<rect width="100%" height="100%" fill="white"/>
<rect x="10" y="10" width="3" height="14" fill="#4e79a7"/>
<text x="16" y="21" fill="#222">e1 f1</text>
<text x="60" y="50">a long label</text>
</svg>"##;
    let r = render(good);
    r.assert_labels_readable();
    r.assert_inside_canvas();
    r.assert_labels_apart();
    assert!((contrast([0, 0, 0], [255, 255, 255]) - 21.0).abs() < 1e-9);
}
