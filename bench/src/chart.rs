//! `chart FILE --out DIR`: SVG charts of a `compare --json` file.
//!
//! One chart, `DIR/<FILE's stem>.svg`: a horizontal bar per target, its
//! length the best run's ratio (sgard / reference) on a logarithmic axis, a
//! whisker from the lowest to the highest run's ratio, and a black line at
//! the target's limit. A bar that misses its limit is hatched and says
//! `NOT MET` beside it, so the chart reads the same without colour.
//!
//! The SVG is written by hand, not with a plotting crate: the chart is a
//! few rectangles, lines and texts, and this way every number is formatted
//! here, so the same JSON always gives the same bytes (no generated ids,
//! no clock) and the output stays small and readable in a diff.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use crate::results::{Limit, ResultRow, Results, ratio_text};

/// Reads `file` and writes its charts into `out` (created if missing);
/// returns the files written.
pub fn write_all(file: &Path, out: &Path) -> Result<Vec<PathBuf>> {
    let results = Results::read(file)?;
    fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let stem = file
        .file_stem()
        .map_or_else(|| "compare".into(), |s| s.to_string_lossy());
    let path = out.join(format!("{stem}.svg"));
    fs::write(&path, ratios_svg(&results))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(vec![path])
}

const WIDTH: f64 = 960.0;
const MARGIN: f64 = 16.0;
/// Where the first row starts.
const TOP: f64 = 112.0;
const ROW_H: f64 = 28.0;
const BAR_H: f64 = 14.0;
/// Room for the verdict right of the plot (`0.123 ≤ 1.00  NOT MET`).
const VERDICT_W: f64 = 168.0;
/// An estimate of one character's width at 12 px, for the label column.
const CHAR_W: f64 = 6.6;

const MET_FILL: &str = "#4a8f5c";
const MISSED_STROKE: &str = "#b03a2e";

/// The horizontal axis: log scale from `lo` to `hi` (both 1, 2 or 5
/// times a power of ten) over `x0..x0 + w`.
struct Axis {
    lo: f64,
    hi: f64,
    x0: f64,
    w: f64,
}

/// 1, 2 and 5 times the powers of ten from `10^-9` to `10^9`, ascending,
/// each the double nearest its decimal (`0.05`, not `0.05000000000000001`).
fn steps() -> impl Iterator<Item = f64> {
    (-9..=9_i32).flat_map(|d| {
        let p = 10f64.powi(d.abs());
        [1.0, 2.0, 5.0].map(|m| if d < 0 { m / p } else { m * p })
    })
}

impl Axis {
    /// The tightest 1-2-5 steps around every positive value, with a little
    /// room on each side.
    fn fit(values: impl Iterator<Item = f64>, x0: f64, w: f64) -> Self {
        let (mut min, mut max) = (f64::INFINITY, 0.0_f64);
        for v in values.filter(|v| v.is_finite() && *v > 0.0) {
            min = min.min(v);
            max = max.max(v);
        }
        if max == 0.0 {
            (min, max) = (0.1, 10.0);
        }
        let lo = steps().filter(|s| *s <= min / 1.1).last().unwrap_or(1e-9);
        let hi = steps().find(|s| *s >= max * 1.1).unwrap_or(1e9);
        Axis {
            lo,
            hi: if hi > lo { hi } else { lo * 10.0 },
            x0,
            w,
        }
    }

    /// Where `v` falls; values off the axis (and 0) stick to its ends.
    fn x(&self, v: f64) -> f64 {
        let (lo, hi) = (self.lo.log10(), self.hi.log10());
        let d = if v > 0.0 { v.log10() } else { lo };
        self.x0 + (d.clamp(lo, hi) - lo) / (hi - lo) * self.w
    }

    /// The 1-2-5 steps from `lo` to `hi`.
    fn ticks(&self) -> Vec<f64> {
        // The steps are exact decimal products, so `lo` and `hi` are among
        // them; the tolerance only guards the comparison.
        steps()
            .filter(|s| *s >= self.lo * 0.999 && *s <= self.hi * 1.001)
            .collect()
    }
}

/// A tick's label: as few decimals as it needs.
fn tick_text(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        let mut s = format!("{v:.6}");
        while s.ends_with('0') {
            s.pop();
        }
        s
    }
}

/// Text for SVG: `&`, `<`, `>` and quotes escaped.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// A row's label: its name without the Markdown backticks.
fn label(row: &ResultRow) -> String {
    row.name.replace('`', "")
}

/// What the chart draws, line by line: a part's heading or a target.
enum Line<'a> {
    Part(&'a str),
    Row(&'a ResultRow),
}

/// The rows, with a heading before each part when there are several.
fn lines(rows: &[ResultRow]) -> Vec<Line<'_>> {
    let several = rows.windows(2).any(|w| w[0].tree != w[1].tree);
    let mut out = Vec::new();
    let mut last: Option<&str> = None;
    for r in rows {
        if several && last != Some(r.tree.as_str()) {
            out.push(Line::Part(&r.tree));
        }
        last = Some(&r.tree);
        out.push(Line::Row(r));
    }
    out
}

/// The title's three lines.
fn header(results: &Results) -> [String; 3] {
    let m = &results.meta;
    let parts = if m.parts.is_empty() {
        "no part".to_owned()
    } else {
        m.parts.join(", ")
    };
    let runs = if m.runs == 1 {
        "one run".to_owned()
    } else {
        format!("best of {} runs", m.runs)
    };
    let commit = match (&m.commit, m.dirty) {
        (Some(c), Some(true)) => format!("commit {} + uncommitted changes", short(c)),
        (Some(c), _) => format!("commit {}", short(c)),
        (None, _) => "commit unknown".to_owned(),
    };
    [
        format!("sgard-bench compare: {parts}, {runs}"),
        format!("{} · {commit} · {}", m.date, m.sgard_version),
        format!(
            "{} × {} · Linux {} · ratio = sgard / reference, log scale",
            m.machine.cores, m.machine.cpu, m.machine.kernel
        ),
    ]
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// The ratio chart of `results`: one bar per row against its limit.
pub fn ratios_svg(results: &Results) -> String {
    let lines = lines(&results.rows);
    let longest = results
        .rows
        .iter()
        .map(|r| label(r).chars().count())
        .max()
        .unwrap_or(0);
    let label_w = (longest as f64 * CHAR_W + 12.0).clamp(160.0, 420.0);
    let plot_x = MARGIN + label_w;
    let plot_w = WIDTH - plot_x - VERDICT_W - MARGIN;
    let axis = Axis::fit(
        results.rows.iter().flat_map(|r| {
            r.ratios
                .iter()
                .flatten()
                .copied()
                .chain(std::iter::once(r.limit.value()))
        }),
        plot_x,
        plot_w,
    );
    let plot_h = lines.len() as f64 * ROW_H;
    let height = TOP + plot_h + 56.0;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH:.0}" height="{height:.0}" viewBox="0 0 {WIDTH:.0} {height:.0}" font-family="DejaVu Sans, Verdana, sans-serif" font-size="12" role="img" aria-labelledby="title">"#
    );
    let head = header(results);
    let _ = writeln!(s, "<title id=\"title\">{}</title>", esc(&head[0]));
    let _ = writeln!(
        s,
        r##"<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#f6dcd8"/><line x1="0" y1="0" x2="0" y2="6" stroke="{MISSED_STROKE}" stroke-width="3"/></pattern></defs>"##
    );
    let _ = writeln!(
        s,
        r##"<rect width="{WIDTH:.0}" height="{height:.0}" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="{MARGIN:.0}" y="26" font-size="16" font-weight="bold">{}</text>"#,
        esc(&head[0])
    );
    for (i, line) in head[1..].iter().enumerate() {
        let _ = writeln!(
            s,
            r##"<text x="{MARGIN:.0}" y="{}" fill="#444444">{}</text>"##,
            46 + 17 * i,
            esc(line)
        );
    }
    legend(&mut s, 92.0);

    // Grid and axis.
    let bottom = TOP + plot_h;
    for t in axis.ticks() {
        let x = axis.x(t);
        let stroke = if (t - 1.0).abs() < 1e-12 {
            "#999999"
        } else {
            "#e4e4e4"
        };
        let _ = writeln!(
            s,
            r#"<line x1="{x:.1}" y1="{TOP:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="{stroke}"/>"#
        );
        let _ = writeln!(
            s,
            r##"<text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#444444">{}</text>"##,
            bottom + 16.0,
            tick_text(t)
        );
    }
    let _ = writeln!(
        s,
        r##"<line x1="{plot_x:.1}" y1="{bottom:.1}" x2="{:.1}" y2="{bottom:.1}" stroke="#444444"/>"##,
        plot_x + plot_w
    );
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#444444">ratio (sgard / reference); lower is better, except for ≥ limits</text>"##,
        plot_x + plot_w / 2.0,
        bottom + 36.0
    );

    let mut y = TOP;
    for line in &lines {
        match line {
            Line::Part(name) => {
                let _ = writeln!(
                    s,
                    r#"<text x="{MARGIN:.0}" y="{:.1}" font-weight="bold">{}</text>"#,
                    y + ROW_H / 2.0 + 4.0,
                    esc(name)
                );
            }
            Line::Row(r) => row(&mut s, &axis, r, plot_x - 8.0, y),
        }
        y += ROW_H;
    }
    s.push_str("</svg>\n");
    s
}

/// The key: what a solid bar, a hatched bar, a whisker and the black line
/// mean.
fn legend(s: &mut String, y: f64) {
    let mid = y - 4.0;
    let _ = writeln!(
        s,
        r#"<rect x="{MARGIN:.0}" y="{:.1}" width="22" height="10" fill="{MET_FILL}"/>"#,
        y - 9.0
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.0}" y="{y:.1}">best run, limit met</text>"#,
        MARGIN + 28.0
    );
    let x = MARGIN + 160.0;
    let _ = writeln!(
        s,
        r#"<rect x="{x:.0}" y="{:.1}" width="22" height="10" fill="url(#hatch)" stroke="{MISSED_STROKE}"/>"#,
        y - 9.0
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.0}" y="{y:.1}">best run, limit NOT met</text>"#,
        x + 28.0
    );
    let x = x + 190.0;
    whisker(s, x, x + 22.0, mid);
    let _ = writeln!(
        s,
        r#"<text x="{:.0}" y="{y:.1}">lowest to highest run</text>"#,
        x + 28.0
    );
    let x = x + 170.0;
    let _ = writeln!(
        s,
        r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#000000" stroke-width="2.5"/>"##,
        y - 12.0,
        y + 2.0
    );
    let _ = writeln!(s, r#"<text x="{:.0}" y="{y:.1}">limit</text>"#, x + 8.0);
}

fn whisker(s: &mut String, x1: f64, x2: f64, y: f64) {
    let _ = writeln!(
        s,
        r##"<g class="whisker" stroke="#222222" stroke-width="1.5"><line x1="{x1:.1}" y1="{y:.1}" x2="{x2:.1}" y2="{y:.1}"/><line x1="{x1:.1}" y1="{:.1}" x2="{x1:.1}" y2="{:.1}"/><line x1="{x2:.1}" y1="{:.1}" x2="{x2:.1}" y2="{:.1}"/></g>"##,
        y - 4.0,
        y + 4.0,
        y - 4.0,
        y + 4.0
    );
}

/// One target: label, bar, whisker, limit and verdict, in the band at `y`.
fn row(s: &mut String, axis: &Axis, r: &ResultRow, label_x: f64, y: f64) {
    let mid = y + ROW_H / 2.0;
    let _ = writeln!(
        s,
        r#"<text x="{label_x:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
        mid + 4.0,
        esc(&label(r))
    );
    let verdict_x = axis.x0 + axis.w + 10.0;
    match r.best_ratio {
        Some(best) => {
            let met = r.limit.met(best);
            let (fill, stroke) = if met {
                (MET_FILL, "none")
            } else {
                ("url(#hatch)", MISSED_STROKE)
            };
            let x = axis.x(best);
            let _ = writeln!(
                s,
                r#"<rect class="bar" x="{:.1}" y="{:.1}" width="{:.1}" height="{BAR_H:.1}" fill="{fill}" stroke="{stroke}"><title>{}: {}</title></rect>"#,
                axis.x0,
                mid - BAR_H / 2.0,
                (x - axis.x0).max(1.0),
                esc(&label(r)),
                esc(&ratio_text(best, r.limit))
            );
            let measured: Vec<f64> = r.ratios.iter().flatten().copied().collect();
            if measured.len() > 1 {
                let lo = measured.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = measured.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                whisker(s, axis.x(lo), axis.x(hi), mid);
            }
            let sign = match (r.limit, met) {
                (Limit::AtMost(_), true) => "≤",
                (Limit::AtMost(_), false) => ">",
                (Limit::AtLeast(_), true) => "≥",
                (Limit::AtLeast(_), false) => "<",
            };
            let (weight, word) = if met {
                ("normal", "met")
            } else {
                ("bold", "NOT MET")
            };
            let _ = writeln!(
                s,
                r#"<text x="{verdict_x:.1}" y="{:.1}">{} {sign} {:.2}  <tspan font-weight="{weight}">{word}</tspan></text>"#,
                mid + 4.0,
                ratio_text(best, r.limit),
                r.limit.value(),
                sign = esc(sign),
            );
        }
        None => {
            let _ = writeln!(
                s,
                r##"<text x="{:.1}" y="{:.1}" font-style="italic" fill="#666666">not measured</text>"##,
                axis.x0 + 6.0,
                mid + 4.0
            );
            let _ = writeln!(
                s,
                r##"<text x="{verdict_x:.1}" y="{:.1}" fill="#666666">{}  not measured</text>"##,
                mid + 4.0,
                esc(&r.limit.describe())
            );
        }
    }
    let x = axis.x(r.limit.value());
    let _ = writeln!(
        s,
        r##"<line class="limit" x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#000000" stroke-width="2.5"/>"##,
        y + 3.0,
        y + ROW_H - 3.0
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Machine, Meta, Quantity, SCHEMA};

    fn row(name: &str, tree: &str, ratios: &[Option<f64>], limit: Limit) -> ResultRow {
        let best = ratios.iter().flatten().copied().reduce(|a, b| match limit {
            Limit::AtMost(_) => a.min(b),
            Limit::AtLeast(_) => a.max(b),
        });
        ResultRow {
            name: name.to_owned(),
            tree: tree.to_owned(),
            sgard_what: "`status`".to_owned(),
            sgard: Quantity::parse("12.00 ms"),
            reference_what: "`git status`".to_owned(),
            reference: Quantity::parse("20.00 ms"),
            best_ratio: best,
            ratios: ratios.to_vec(),
            limit,
            met: best.map(|b| limit.met(b)),
        }
    }

    fn results(rows: Vec<ResultRow>) -> Results {
        Results {
            schema: SCHEMA,
            meta: Meta {
                date: "2026-01-02T03:04:05Z".to_owned(),
                commit: Some("0123456789abcdef0123456789abcdef01234567".to_owned()),
                dirty: Some(false),
                sgard_version: "sgard 0.1.0".to_owned(),
                runs: 3,
                parts: vec!["T10k".to_owned()],
                seconds: 300.0,
                machine: Machine {
                    cpu: "Some CPU <v2>".to_owned(),
                    cores: 2,
                    kernel: "6.1".to_owned(),
                },
            },
            rows,
        }
    }

    fn sample() -> Results {
        results(vec![
            row(
                "1 status, unchanged",
                "T10k",
                &[Some(0.6), Some(0.55), Some(0.7)],
                Limit::AtMost(1.0),
            ),
            row(
                "(1) status, no cache",
                "T10k",
                &[Some(2.4), Some(2.1), Some(2.9)],
                Limit::AtMost(2.0),
            ),
            row(
                "3 first add vs restic",
                "T10k",
                &[None, None, None],
                Limit::AtMost(0.5),
            ),
            row(
                "4 BIG add, throughput",
                "BIG",
                &[Some(0.9), Some(0.85), Some(0.95)],
                Limit::AtLeast(0.8),
            ),
        ])
    }

    #[test]
    fn the_same_json_gives_the_same_bytes() {
        let r = sample();
        assert_eq!(ratios_svg(&r), ratios_svg(&r.clone()));
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("compare-x.json");
        r.write(&json).unwrap();
        let out = dir.path().join("charts");
        let first = write_all(&json, &out).unwrap();
        assert_eq!(first, vec![out.join("compare-x.svg")]);
        let bytes = fs::read(&first[0]).unwrap();
        write_all(&json, &out).unwrap();
        assert_eq!(fs::read(&first[0]).unwrap(), bytes);
        assert_eq!(bytes, ratios_svg(&r).into_bytes());
    }

    #[test]
    fn one_bar_and_one_limit_per_row_whiskers_for_several_runs() {
        let svg = ratios_svg(&sample());
        // Three measured rows, one not measured.
        assert_eq!(svg.matches(r#"class="bar""#).count(), 3);
        assert_eq!(svg.matches(r#"class="limit""#).count(), 4);
        // Three rows' whiskers and the legend's.
        assert_eq!(svg.matches(r#"class="whisker""#).count(), 4);
        assert!(svg.contains("not measured"));
        // Two parts: a heading for each.
        assert!(svg.contains(r#"font-weight="bold">T10k</text>"#));
        assert!(svg.contains(r#"font-weight="bold">BIG</text>"#));

        let one = results(vec![row("x", "T10k", &[Some(0.5)], Limit::AtMost(1.0))]);
        let svg = ratios_svg(&one);
        assert_eq!(svg.matches(r#"class="whisker""#).count(), 1);
        assert!(!svg.contains(r#"font-weight="bold">T10k</text>"#));
    }

    #[test]
    fn a_missed_limit_is_hatched_and_says_so() {
        let svg = ratios_svg(&sample());
        let bars: Vec<&str> = svg
            .lines()
            .filter(|l| l.contains(r#"class="bar""#))
            .collect();
        let hatched: Vec<&&str> = bars.iter().filter(|l| l.contains("url(#hatch)")).collect();
        assert_eq!(hatched.len(), 1);
        assert!(hatched[0].contains("(1) status, no cache"));
        assert!(svg.contains("2.10 &gt; 2.00  <tspan font-weight=\"bold\">NOT MET"));
        assert!(svg.contains("0.55 ≤ 1.00  <tspan font-weight=\"normal\">met"));
        assert!(svg.contains("0.95 ≥ 0.80"));
    }

    #[test]
    fn labels_and_titles_are_escaped() {
        let mut r = results(vec![row(
            "a < b & `c`",
            "T10k",
            &[Some(0.5), Some(0.6)],
            Limit::AtMost(1.0),
        )]);
        r.meta.commit = None;
        let svg = ratios_svg(&r);
        assert!(svg.contains(">a &lt; b &amp; c</text>"));
        assert!(svg.contains("Some CPU &lt;v2&gt;"));
        assert!(!svg.contains("a < b"));
        assert!(svg.contains("commit unknown"));
        assert_eq!(esc(r#"'"&"#), "&#39;&quot;&amp;");
    }

    #[test]
    fn the_axis_holds_every_ratio_and_limit() {
        let a = Axis::fit([0.12, 1.0, 4.0].into_iter(), 100.0, 500.0);
        assert_eq!((a.lo, a.hi), (0.1, 5.0));
        assert_eq!(a.ticks(), [0.1, 0.2, 0.5, 1.0, 2.0, 5.0]);
        let at = |v: f64| 100.0 + 500.0 * (v / 0.1).log10() / 50f64.log10();
        assert!((a.x(1.0) - at(1.0)).abs() < 1e-9);
        assert!((a.x(0.0) - 100.0).abs() < 1e-9);
        assert!((a.x(1e9) - 600.0).abs() < 1e-9);
        assert_eq!(tick_text(0.05), "0.05");
        assert_eq!(tick_text(2.0), "2");
        let empty = Axis::fit(std::iter::empty(), 0.0, 1.0);
        assert_eq!((empty.lo, empty.hi), (0.05, 20.0));
    }
}
