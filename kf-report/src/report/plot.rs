//! The pictures: the archive heatmap and the progress curve, drawn with plotters into memory
//! and encoded as PNG.
//!
//! Text is drawn with `ab_glyph` from a TrueType font found at run time (`KERNELFOUNDRY_FONT`,
//! else DejaVu, Liberation or Noto Sans in the usual places, else any `.ttf` under
//! `/usr/share/fonts`), so nothing is linked against fontconfig or freetype. Without a usable
//! font the pictures are drawn without text.

use std::path::Path;
use std::sync::OnceLock;

use kf_core::{DescriptorSpace, Elite, HistoryPoint};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontTransform;

use super::error::PlotError;
use super::progress::TracePoint;
use super::table::{correct_gflops, level_name};

/// Size of the progress curve in pixels.
pub const CURVE_SIZE: (u32, u32) = (900, 500);

/// Size of the archive heatmap of a 3-D space in pixels (one 400 × 440 panel per pair of
/// dimensions; see [`heatmap_size`]).
pub const HEATMAP_SIZE: (u32, u32) = (1200, 440);

const PANEL_W: u32 = 400;
const PANEL_H: u32 = 440;
const FONT: &str = "sans-serif";

/// Heatmap size for `space`: one panel per pair of dimensions (one panel for a 1-D space).
pub fn heatmap_size(space: &DescriptorSpace) -> (u32, u32) {
    let panels = pairs(space.ndim()).len().max(1);
    (PANEL_W * panels as u32, PANEL_H)
}

fn pairs(ndim: usize) -> Vec<(usize, usize)> {
    let mut v = Vec::new();
    for a in 0..ndim {
        for b in a + 1..ndim {
            v.push((a, b));
        }
    }
    v
}

// ---------------------------------------------------------------------------------------------
// Fonts

fn font_candidates() -> Vec<std::path::PathBuf> {
    let mut v: Vec<std::path::PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("KERNELFOUNDRY_FONT") {
        v.push(p.into());
    }
    for p in [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
        "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
        "/usr/share/fonts/noto/NotoSans-Regular.ttf",
        "/System/Library/Fonts/Supplemental/Arial.ttf",
        "/Library/Fonts/Arial.ttf",
        "C:\\Windows\\Fonts\\arial.ttf",
    ] {
        v.push(p.into());
    }
    // Any TrueType font under /usr/share/fonts, sans-serif ones first.
    let mut found = Vec::new();
    let mut stack = vec![(std::path::PathBuf::from("/usr/share/fonts"), 0)];
    let mut seen = 0;
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > 5000 {
                break;
            }
            let p = e.path();
            if p.is_dir() && depth < 4 {
                stack.push((p, depth + 1));
            } else if p.extension().is_some_and(|x| x.eq_ignore_ascii_case("ttf")) {
                found.push(p);
            }
        }
    }
    found.sort_by_key(|p| {
        let n = p.to_string_lossy().to_ascii_lowercase();
        (
            !n.contains("sans"),
            n.contains("bold") || n.contains("italic") || n.contains("oblique"),
            n,
        )
    });
    v.extend(found);
    v
}

fn register(path: &Path, style: FontStyle) -> bool {
    let Ok(bytes) = std::fs::read(path) else {
        return false;
    };
    // Registered fonts live for the whole program (plotters keeps `'static` references); this
    // happens at most once per style.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font(FONT, style, bytes).is_ok()
}

fn probe() -> bool {
    let font = (FONT, 14.0).into_font();
    font.box_size("Ag 0.1").is_ok_and(|(w, h)| w > 0 && h > 0)
}

/// Whether the pictures can have text: a usable font was found (searched once per process).
pub fn fonts_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        for path in font_candidates() {
            if path.is_file() && register(&path, FontStyle::Normal) && probe() {
                let bold = path.with_file_name(
                    path.file_name()
                        .map(|n| n.to_string_lossy().replace(".ttf", "-Bold.ttf"))
                        .unwrap_or_default(),
                );
                if bold.is_file() {
                    register(&bold, FontStyle::Bold);
                }
                tracing::debug!("report pictures use the font {}", path.display());
                return true;
            }
        }
        // Fonts a linked font system might provide (when plotters' `ttf` feature is on).
        let ok = probe();
        if !ok {
            tracing::warn!(
                "no usable TrueType font found (set KERNELFOUNDRY_FONT to a .ttf file); \
                 report pictures are drawn without text"
            );
        }
        ok
    })
}

// ---------------------------------------------------------------------------------------------
// Drawing helpers

type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

/// Draws text only when fonts are available.
struct Pen {
    text: bool,
}

impl Pen {
    /// Draws `s` with `look`, its anchor (centred vertically) at `(x, y)`: nothing when the
    /// pictures have no text or `s` is empty.
    fn text(
        &self,
        area: &Area<'_>,
        s: &str,
        (x, y): (i32, i32),
        look: Look,
    ) -> Result<(), PlotError> {
        if !self.text || s.is_empty() {
            return Ok(());
        }
        let font = if look.bold {
            (FONT, look.size, FontStyle::Bold).into_font()
        } else {
            (FONT, look.size).into_font()
        };
        let font = if look.upwards {
            font.transform(FontTransform::Rotate270)
        } else {
            font
        };
        let style = font
            .color(&look.color)
            .pos(Pos::new(look.anchor, VPos::Center));
        Ok(area.draw(&Text::new(s.to_owned(), (x, y), style))?)
    }

    /// The first of `candidates` (longest first) that fits in `max_width` pixels at `size`, or
    /// the last (shortest) when none does: titles that fit narrow pictures instead of being cut.
    fn fit<'s>(&self, candidates: &'s [String], size: f64, max_width: u32) -> &'s str {
        let fits = |s: &str| {
            (FONT, size)
                .into_font()
                .box_size(s)
                .is_ok_and(|(w, _)| w <= max_width)
        };
        candidates
            .iter()
            .find(|c| fits(c))
            .or(candidates.last())
            .map_or("", String::as_str)
    }
}

/// How a piece of text looks: its size, colour and weight, which of its points
/// (horizontally) stands at the position it is drawn at, and whether it reads upwards.
#[derive(Clone, Copy)]
struct Look {
    size: f64,
    color: RGBColor,
    bold: bool,
    anchor: HPos,
    upwards: bool,
}

impl Look {
    /// Regular text of `size` in `color`, centred on its position.
    const fn plain(size: f64, color: RGBColor) -> Self {
        Look {
            size,
            color,
            bold: false,
            anchor: HPos::Center,
            upwards: false,
        }
    }

    /// This look, in bold.
    const fn bold(self) -> Self {
        self.bold_if(true)
    }

    /// This look, in bold where `bold` says so.
    const fn bold_if(self, bold: bool) -> Self {
        Look { bold, ..self }
    }

    /// This look, turned to read upwards (an axis title beside the picture).
    const fn upwards(self) -> Self {
        Look {
            upwards: true,
            ..self
        }
    }

    /// This look, ending at its position (right-aligned) instead of centred on it.
    const fn right_aligned(self) -> Self {
        Look {
            anchor: HPos::Right,
            ..self
        }
    }
}

fn rect(area: &Area<'_>, a: (i32, i32), b: (i32, i32), style: ShapeStyle) -> Result<(), PlotError> {
    Ok(area.draw(&Rectangle::new([a, b], style))?)
}

/// Viridis, sampled at nine points.
const VIRIDIS: [(u8, u8, u8); 9] = [
    (68, 1, 84),
    (71, 44, 122),
    (59, 81, 139),
    (44, 113, 142),
    (33, 144, 141),
    (39, 173, 129),
    (92, 200, 99),
    (170, 220, 50),
    (253, 231, 37),
];

fn viridis(t: f64) -> RGBColor {
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let x = t * (VIRIDIS.len() - 1) as f64;
    let i = (x.floor() as usize).min(VIRIDIS.len() - 2);
    let f = x - i as f64;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    let mix = |p: u8, q: u8| (f64::from(p) + (f64::from(q) - f64::from(p)) * f).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

const EMPTY: RGBColor = RGBColor(222, 222, 222);
const NO_SPEED: RGBColor = RGBColor(240, 190, 180);
const INK: RGBColor = RGBColor(30, 30, 30);
const FAINT: RGBColor = RGBColor(110, 110, 110);

/// Splits a level name into lines of about `max` characters at underscores and spaces, at most
/// `max_lines` of them (the last one takes what is left).
fn wrap_label(name: &str, max: usize, max_lines: usize) -> Vec<String> {
    let words: Vec<&str> = name.split(['_', ' ']).filter(|w| !w.is_empty()).collect();
    if words.is_empty() {
        return vec![name.to_owned()];
    }
    let mut lines: Vec<String> = vec![String::new()];
    for w in words {
        let last = lines.last().map_or(0, String::len);
        if last > 0 && last + 1 + w.len() > max && lines.len() < max_lines.max(1) {
            lines.push(w.to_owned());
        } else if let Some(l) = lines.last_mut() {
            if !l.is_empty() {
                l.push(' ');
            }
            l.push_str(w);
        }
    }
    lines
}

fn to_png(buf: &[u8], (w, h): (u32, u32)) -> Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::Best);
        let mut writer = enc.write_header()?;
        writer.write_image_data(buf)?;
        writer.finish()?;
    }
    Ok(out)
}

/// A picture drawn into an RGB buffer.
pub(crate) struct Rendered {
    pixels: Vec<u8>,
    text: bool,
}

impl Rendered {
    /// Whether the picture has text.
    pub(crate) fn has_text(&self) -> bool {
        self.text
    }
}

/// Draws a picture with `draw`: with text when `text` is true and drawing text works, else
/// without. Panics inside plotters become errors.
fn render(
    size: (u32, u32),
    text: bool,
    draw: &dyn Fn(&Area<'_>, &Pen) -> Result<(), PlotError>,
) -> Result<Rendered, PlotError> {
    let attempt = |with_text: bool| -> Result<Vec<u8>, PlotError> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut buf = vec![255u8; size.0 as usize * size.1 as usize * 3];
            {
                let area = BitMapBackend::with_buffer(&mut buf, size).into_drawing_area();
                area.fill(&WHITE)?;
                draw(&area, &Pen { text: with_text })?;
                area.present()?;
            }
            Ok(buf)
        }))
        .unwrap_or_else(|_| Err(PlotError::Panicked))
    };
    if text {
        match attempt(true) {
            Ok(pixels) => return Ok(Rendered { pixels, text: true }),
            Err(e) => {
                tracing::warn!("drawing a picture with text failed ({e}); drawing it without")
            }
        }
    }
    attempt(false).map(|pixels| Rendered {
        pixels,
        text: false,
    })
}

pub(crate) fn encode(rendered: Rendered, size: (u32, u32)) -> Result<Vec<u8>, png::EncodingError> {
    to_png(&rendered.pixels, size)
}

// ---------------------------------------------------------------------------------------------
// The heatmap

/// What a projected cell shows.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Shown {
    Empty,
    /// Filled, but no correct kernel with a GFLOP/s figure.
    NoSpeed {
        correct: bool,
    },
    Gflops(f64),
}

/// The best of `elites` per cell of dimensions `a` × `b` (`b == usize::MAX`: `a` alone, as
/// one row), indexed `[level of a][level of b]`.
fn project(elites: &[&Elite], a: usize, b: usize, na: usize, nb: usize) -> Vec<Vec<Shown>> {
    let mut grid = vec![vec![Shown::Empty; nb]; na];
    for e in elites {
        let c = &e.descriptor.coords;
        let j = if b == usize::MAX { Some(&0) } else { c.get(b) };
        let (Some(&i), Some(&j)) = (c.get(a), j) else {
            continue;
        };
        if i >= na || j >= nb {
            continue;
        }
        let cell = &mut grid[i][j];
        let mine = match correct_gflops(e) {
            Some(g) => Shown::Gflops(g),
            None => Shown::NoSpeed {
                correct: e.evaluation.status.is_correct(),
            },
        };
        *cell = match (*cell, mine) {
            (Shown::Gflops(x), Shown::Gflops(y)) => Shown::Gflops(x.max(y)),
            (Shown::Gflops(x), _) | (_, Shown::Gflops(x)) => Shown::Gflops(x),
            (Shown::NoSpeed { correct: p }, Shown::NoSpeed { correct: q }) => {
                Shown::NoSpeed { correct: p || q }
            }
            (Shown::Empty, m) | (m, Shown::Empty) => m,
        };
    }
    grid
}

/// Draws the archive heatmap of `elites` over `space`.
pub(crate) fn draw_heatmap(
    elites: &[&Elite],
    space: &DescriptorSpace,
    baseline_gflops: Option<f64>,
    title: Option<&str>,
    text: bool,
) -> Result<(Rendered, (u32, u32)), PlotError> {
    let size = heatmap_size(space);
    let prefix = title.map_or_else(String::new, |t| format!("{t}: "));
    let mut panels = pairs(space.ndim());
    if panels.is_empty() {
        panels.push((0, usize::MAX));
    }
    let heatmap = Heatmap {
        elites,
        space,
        baseline_gflops,
        vmax: elites
            .iter()
            .filter_map(|e| correct_gflops(e))
            .fold(0.0f64, f64::max),
    };
    let draw = |root: &Area<'_>, pen: &Pen| -> Result<(), PlotError> {
        let captions = heatmap_captions(&prefix, elites.len(), space.cells(), heatmap.vmax);
        let caption = pen.fit(&captions, 15.0, size.0.saturating_sub(16));
        pen.text(
            root,
            caption,
            (size.0 as i32 / 2, 14),
            Look::plain(15.0, INK),
        )?;
        for (p, &(a, b)) in panels.iter().enumerate() {
            heatmap.draw_panel(root, pen, (p as u32 * PANEL_W) as i32, a, b)?;
        }
        Ok(())
    };
    render(size, text, &draw).map(|r| (r, size))
}

/// The heatmap's caption, in versions from longest to shortest (the first that fits the
/// picture's width is drawn).
fn heatmap_captions(prefix: &str, filled: usize, cells: usize, vmax: f64) -> Vec<String> {
    if vmax > 0.0 {
        vec![
            format!("{prefix}best GFLOP/s per archive cell ({filled}/{cells} cells filled; grey: empty)"),
            format!("{prefix}best GFLOP/s per cell ({filled}/{cells} filled)"),
            format!("best GFLOP/s per cell ({filled}/{cells} filled)"),
            format!("{filled}/{cells} cells filled"),
        ]
    } else {
        vec![
            format!("{prefix}filled archive cells ({filled}/{cells} filled; grey: empty; no GFLOP/s measured)"),
            format!("{prefix}filled cells ({filled}/{cells}; no GFLOP/s measured)"),
            format!("filled cells ({filled}/{cells}; no GFLOP/s measured)"),
            format!("{filled}/{cells} cells filled"),
        ]
    }
}

/// What every panel of a heatmap draws from.
struct Heatmap<'a> {
    elites: &'a [&'a Elite],
    space: &'a DescriptorSpace,
    /// The naive seed's GFLOP/s, for the speed-ups under the cells' figures.
    baseline_gflops: Option<f64>,
    /// The best GFLOP/s of all, the top of the colour scale (0: none measured).
    vmax: f64,
}

/// Where a panel's grid of cells lies: its pixel bounds, and the size of one cell.
struct GridBox {
    gx0: i32,
    gx1: i32,
    gy0: i32,
    gy1: i32,
    cw: f64,
    ch: f64,
}

impl Heatmap<'_> {
    /// The name of dimension `d`, or `dim d` when the space has no such dimension.
    fn dim_name(&self, d: usize) -> String {
        self.space
            .dimensions
            .get(d)
            .map_or_else(|| format!("dim {d}"), |x| x.name.clone())
    }

    /// Draws the panel of dimensions `a` × `b` (`b == usize::MAX`: `a` alone, as one row)
    /// whose left edge is at `x0`.
    fn draw_panel(
        &self,
        root: &Area<'_>,
        pen: &Pen,
        x0: i32,
        a: usize,
        b: usize,
    ) -> Result<(), PlotError> {
        let shape = self.space.shape();
        let na = shape.get(a).copied().unwrap_or(1);
        let (nb, grid) = if b == usize::MAX {
            // One dimension: a single row.
            (1, project(self.elites, a, usize::MAX, na, 1))
        } else {
            let nb = shape.get(b).copied().unwrap_or(1);
            (nb, project(self.elites, a, b, na, nb))
        };
        let (title, over) = self.panel_titles(a, b);
        let title_x = x0 + PANEL_W as i32 / 2 + 20;
        pen.text(root, &title, (title_x, 42), Look::plain(15.0, INK).bold())?;
        if let Some(over) = over {
            pen.text(root, &over, (title_x, 60), Look::plain(12.0, FAINT))?;
        }
        let (gx0, gx1) = (x0 + 118, x0 + PANEL_W as i32 - 14);
        let (gy0, gy1) = (74, PANEL_H as i32 - 76);
        let geometry = GridBox {
            gx0,
            gx1,
            gy0,
            gy1,
            cw: (gx1 - gx0) as f64 / na as f64,
            ch: (gy1 - gy0) as f64 / nb as f64,
        };
        for (i, column) in grid.iter().enumerate() {
            for (j, shown) in column.iter().enumerate() {
                self.draw_cell(root, pen, &geometry, (i, j), *shown)?;
            }
        }
        self.draw_axis_labels(root, pen, &geometry, x0, (a, na), (b, nb))
    }

    /// The panel's title (its dimensions), and the note of which dimensions its cells take the
    /// best over (none when the panel shows them all).
    fn panel_titles(&self, a: usize, b: usize) -> (String, Option<String>) {
        let hidden: Vec<String> = (0..self.space.ndim())
            .filter(|d| *d != a && *d != b)
            .map(|d| self.dim_name(d))
            .collect();
        let title = if b == usize::MAX {
            self.dim_name(a)
        } else {
            format!("{} × {}", self.dim_name(a), self.dim_name(b))
        };
        let over = (!hidden.is_empty()).then(|| format!("max over {}", hidden.join(", ")));
        (title, over)
    }

    /// How a cell looks: its fill, its lines of text, and whether the fill is dark (white
    /// text).
    fn cell_look(&self, shown: Shown) -> (RGBColor, Vec<String>, bool) {
        match shown {
            Shown::Empty => (EMPTY, Vec::new(), false),
            Shown::NoSpeed { correct } => (
                NO_SPEED,
                vec![if correct { "no GFLOP/s" } else { "incorrect" }.to_owned()],
                false,
            ),
            Shown::Gflops(g) => {
                let t = if self.vmax > 0.0 { g / self.vmax } else { 0.0 };
                let mut l = vec![format!("{g:.1}")];
                if let Some(bl) = self.baseline_gflops.filter(|b| b.is_finite() && *b > 0.0) {
                    l.push(format!("{:.1}x", g / bl));
                }
                (viridis(t), l, t < 0.6)
            }
        }
    }

    /// Draws cell `(i, j)` of the grid (level 0 at the bottom) with its figures.
    fn draw_cell(
        &self,
        root: &Area<'_>,
        pen: &Pen,
        geometry: &GridBox,
        (i, j): (usize, usize),
        shown: Shown,
    ) -> Result<(), PlotError> {
        let GridBox {
            gx0, gy1, cw, ch, ..
        } = *geometry;
        let left = gx0 + (i as f64 * cw).round() as i32;
        let right = gx0 + ((i + 1) as f64 * cw).round() as i32;
        let top = gy1 - ((j + 1) as f64 * ch).round() as i32;
        let bottom = gy1 - (j as f64 * ch).round() as i32;
        let (fill, lines, dark) = self.cell_look(shown);
        rect(root, (left, top), (right, bottom), fill.filled())?;
        rect(root, (left, top), (right, bottom), WHITE.stroke_width(2))?;
        let color = if dark { WHITE } else { INK };
        let cx = (left + right) / 2;
        let cy = (top + bottom) / 2;
        match lines.as_slice() {
            [] => {}
            [one] => {
                let size = if one.len() > 6 { 11.0 } else { 16.0 };
                pen.text(
                    root,
                    one,
                    (cx, cy),
                    Look::plain(size, color).bold_if(size > 12.0),
                )?;
            }
            [first, second, ..] => {
                pen.text(root, first, (cx, cy - 9), Look::plain(16.0, color).bold())?;
                pen.text(root, second, (cx, cy + 11), Look::plain(12.0, color))?;
            }
        }
        Ok(())
    }

    /// Axis labels: level names under the columns (dimension `a`, `na` levels) and left of
    /// the rows (dimension `b`, `nb` levels, when the panel has rows), with the axes' names.
    fn draw_axis_labels(
        &self,
        root: &Area<'_>,
        pen: &Pen,
        geometry: &GridBox,
        x0: i32,
        (a, na): (usize, usize),
        (b, nb): (usize, usize),
    ) -> Result<(), PlotError> {
        let GridBox {
            gx0,
            gx1,
            gy0,
            gy1,
            cw,
            ch,
        } = *geometry;
        for i in 0..na {
            let cx = gx0 + ((i as f64 + 0.5) * cw).round() as i32;
            for (k, line) in wrap_label(&level_name(self.space, a, i), 10, 3)
                .iter()
                .enumerate()
            {
                pen.text(
                    root,
                    line,
                    (cx, gy1 + 12 + 14 * k as i32),
                    Look::plain(12.0, INK),
                )?;
            }
        }
        pen.text(
            root,
            &format!("{} →", self.dim_name(a)),
            ((gx0 + gx1) / 2, gy1 + 62),
            Look::plain(13.0, FAINT),
        )?;
        if b == usize::MAX {
            return Ok(());
        }
        for j in 0..nb {
            let cy = gy1 - ((j as f64 + 0.5) * ch).round() as i32;
            let lines = wrap_label(&level_name(self.space, b, j), 14, 3);
            let n = lines.len() as i32;
            for (k, line) in lines.iter().enumerate() {
                pen.text(
                    root,
                    line,
                    (gx0 - 6, cy + 14 * k as i32 - 7 * (n - 1)),
                    Look::plain(12.0, INK).right_aligned(),
                )?;
            }
        }
        pen.text(
            root,
            &format!("{} →", self.dim_name(b)),
            (x0 + 12, (gy0 + gy1) / 2),
            Look::plain(13.0, FAINT).upwards(),
        )
    }
}

// ---------------------------------------------------------------------------------------------
// The curve

/// The data of the progress curve.
pub(crate) struct CurveData {
    /// `(evaluations, best)` points of the top panel.
    pub best: Vec<(f64, f64)>,
    /// What `best` measures.
    pub best_label: &'static str,
    /// `(evaluations, QD-score)` points.
    pub qd: Vec<(f64, f64)>,
    /// Naive seed GFLOP/s, drawn as a reference line when `best` is GFLOP/s.
    pub baseline: Option<f64>,
    /// What was searched, for the caption.
    pub title: Option<String>,
}

impl CurveData {
    /// From a progress trace (best GFLOP/s) when it has any, else from the engine's history
    /// (best fitness).
    pub(crate) fn new(
        trace: &[TracePoint],
        history: &[HistoryPoint],
        baseline: Option<f64>,
    ) -> Self {
        let baseline = baseline.filter(|b| b.is_finite() && *b > 0.0);
        if trace.iter().any(|p| p.best_gflops.is_some()) {
            CurveData {
                best: trace
                    .iter()
                    .filter_map(|p| {
                        p.best_gflops
                            .filter(|g| g.is_finite())
                            .map(|g| (p.evaluations as f64, g))
                    })
                    .collect(),
                best_label: "best GFLOP/s",
                qd: finite_qd(trace.iter().map(|p| (p.evaluations, p.qd_score))),
                baseline,
                title: None,
            }
        } else {
            CurveData {
                best: history
                    .iter()
                    .filter_map(|p| {
                        p.best
                            .map(|f| (p.evaluations as f64, f.value()))
                            .filter(|(_, v)| v.is_finite())
                    })
                    .collect(),
                best_label: "best fitness",
                qd: finite_qd(history.iter().map(|p| (p.evaluations, p.qd_score))),
                baseline: None,
                title: None,
            }
        }
    }
}

/// The QD-score curve of a run's points (evaluations, QD score), by evaluations, leaving out
/// scores that are not finite: the same from the live trace as from the engine's history.
fn finite_qd(points: impl Iterator<Item = (u64, f64)>) -> Vec<(f64, f64)> {
    points
        .filter(|(_, qd)| qd.is_finite())
        .map(|(evaluations, qd)| (evaluations as f64, qd))
        .collect()
}

/// A step line through `points` (values hold until the next point).
fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut v = Vec::with_capacity(points.len() * 2);
    for (k, &(x, y)) in points.iter().enumerate() {
        if k > 0 {
            v.push((x, points[k - 1].1));
        }
        v.push((x, y));
    }
    v
}

/// One chart of the curve picture.
struct PanelSpec<'a> {
    title: &'a str,
    y_desc: &'a str,
    color: RGBColor,
    /// A horizontal reference line and its legend label.
    reference: Option<(f64, &'a str)>,
    x_desc: Option<&'a str>,
    legend_at: SeriesLabelPosition,
}

fn panel(
    area: &Area<'_>,
    pen: &Pen,
    points: &[(f64, f64)],
    x_max: f64,
    spec: &PanelSpec<'_>,
) -> Result<(), PlotError> {
    let y_max = points
        .iter()
        .map(|p| p.1)
        .chain(spec.reference.map(|r| r.0))
        .fold(0.0f64, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.12 } else { 1.0 };
    let y_format = move |y: &f64| {
        if y_max >= 20.0 {
            format!("{y:.0}")
        } else {
            format!("{y:.1}")
        }
    };
    let mut builder = ChartBuilder::on(area);
    builder.margin(12);
    if pen.text {
        builder
            .caption(spec.title, (FONT, 17))
            .x_label_area_size(if spec.x_desc.is_some() { 42 } else { 24 })
            .y_label_area_size(70);
    } else {
        builder.x_label_area_size(8).y_label_area_size(8);
    }
    let mut chart = builder.build_cartesian_2d(0f64..x_max, 0f64..y_max)?;
    {
        let mut mesh = chart.configure_mesh();
        mesh.light_line_style(RGBColor(246, 246, 246))
            .bold_line_style(RGBColor(215, 215, 215));
        if pen.text {
            mesh.x_labels(10)
                .y_labels(6)
                .label_style((FONT, 13))
                .y_desc(spec.y_desc)
                .axis_desc_style((FONT, 14))
                .x_label_formatter(&|x| format!("{x:.0}"))
                .y_label_formatter(&y_format);
            if let Some(d) = spec.x_desc {
                mesh.x_desc(d);
            }
        } else {
            mesh.x_labels(0).y_labels(0);
        }
        mesh.draw()?;
    }
    if let Some((value, label)) = spec.reference {
        let series = chart.draw_series(DashedLineSeries::new(
            [(0.0, value), (x_max, value)],
            8,
            5,
            RGBColor(150, 150, 150).stroke_width(2),
        ))?;
        if pen.text {
            series.label(label.to_owned()).legend(|(x, y)| {
                PathElement::new(
                    [(x, y), (x + 20, y)],
                    RGBColor(150, 150, 150).stroke_width(2),
                )
            });
        }
    }
    let color = spec.color;
    let series = chart.draw_series(LineSeries::new(steps(points), color.stroke_width(2)))?;
    if pen.text {
        series
            .label(spec.y_desc.to_owned())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
        chart
            .configure_series_labels()
            .position(spec.legend_at.clone())
            .label_font((FONT, 13))
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(190, 190, 190))
            .draw()?;
    }
    if points.is_empty() {
        let (w, h) = area.dim_in_pixel();
        pen.text(
            area,
            "no data",
            (w as i32 / 2, h as i32 / 2),
            Look::plain(16.0, FAINT),
        )?;
    }
    Ok(())
}

/// Draws the progress curve: best GFLOP/s (or fitness) above, QD-score below.
pub(crate) fn draw_curve(
    data: &CurveData,
    text: bool,
) -> Result<(Rendered, (u32, u32)), PlotError> {
    let size = CURVE_SIZE;
    let x_max = data
        .best
        .iter()
        .chain(&data.qd)
        .map(|p| p.0)
        .fold(1.0f64, f64::max);
    let draw = |root: &Area<'_>, pen: &Pen| -> Result<(), PlotError> {
        let (top, bottom) = root.split_vertically(size.1 / 2);
        let reference = data.baseline.map(|b| (b, "naive seed"));
        let what = if data.best_label == "best GFLOP/s" {
            "Best GFLOP/s against evaluations"
        } else {
            "Best fitness against evaluations"
        };
        let titles: Vec<String> = match &data.title {
            Some(t) => vec![format!("{t}: {what}"), what.to_owned()],
            None => vec![what.to_owned()],
        };
        let title = pen.fit(&titles, 17.0, size.0.saturating_sub(24));
        let top_spec = PanelSpec {
            title,
            y_desc: data.best_label,
            color: RGBColor(33, 102, 172),
            reference,
            x_desc: None,
            legend_at: SeriesLabelPosition::MiddleRight,
        };
        panel(&top, pen, &data.best, x_max, &top_spec)?;
        let bottom_spec = PanelSpec {
            title: "QD-score against evaluations",
            y_desc: "QD-score",
            color: RGBColor(214, 96, 77),
            reference: None,
            x_desc: Some("evaluations"),
            legend_at: SeriesLabelPosition::UpperLeft,
        };
        panel(&bottom, pen, &data.qd, x_max, &bottom_spec)
    };
    render(size, text, &draw).map(|r| (r, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_wrap_at_underscores_into_two_lines() {
        assert_eq!(wrap_label("global", 10, 3), ["global"]);
        assert_eq!(
            wrap_label("coalesced_vectorised", 10, 3),
            ["coalesced", "vectorised"]
        );
        assert_eq!(
            wrap_label("tiled_register_blocked", 10, 3),
            ["tiled", "register", "blocked"]
        );
        assert_eq!(
            wrap_label("tiled_register_blocked", 14, 3),
            ["tiled register", "blocked"]
        );
        assert_eq!(wrap_label("a_b_c_d_e_f", 3, 2), ["a b", "c d e f"]);
    }

    #[test]
    fn viridis_runs_from_purple_to_yellow() {
        assert_eq!(viridis(0.0), RGBColor(68, 1, 84));
        assert_eq!(viridis(1.0), RGBColor(253, 231, 37));
        assert_eq!(viridis(f64::NAN), RGBColor(68, 1, 84));
        assert_eq!(viridis(7.0), RGBColor(253, 231, 37));
    }

    #[test]
    fn steps_hold_values_until_the_next_point() {
        assert_eq!(
            steps(&[(1.0, 2.0), (3.0, 5.0)]),
            [(1.0, 2.0), (3.0, 2.0), (3.0, 5.0)]
        );
    }
}
