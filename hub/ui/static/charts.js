// Two charts drawn as SVG, no library: lines over time (queue usage, sampled by the page as
// the watch reports changes) and a histogram (time to admission). Each chart is a figure with
// a caption and an accessible description; the numbers are also in a <title> per mark, so a
// pointer or a screen reader gets them.
// Called by queues.js (usage over time) and workloads.js (time-to-admission histogram).

import { h, svg } from "./dom.js";
import { duration } from "./model.js";

const WIDTH = 640;
const HEIGHT = 220;
const PAD = { left: 48, right: 12, top: 12, bottom: 28 };
// Colours that keep a 3:1 contrast against the white chart background.
export const PALETTE = ["#1f5fa8", "#b3261e", "#1b7a3a", "#8a4b00", "#6b3fa0", "#00687a", "#a0306a", "#4d5a00"];

function frame(label, description) {
  const root = svg("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    class: "chart",
    role: "img",
    "aria-label": `${label}. ${description}`,
  });
  return root;
}

function axis(root, yMax, format) {
  const plotHeight = HEIGHT - PAD.top - PAD.bottom;
  for (const fraction of [0, 0.5, 1]) {
    const y = PAD.top + plotHeight * (1 - fraction);
    root.append(
      svg("line", { x1: PAD.left, x2: WIDTH - PAD.right, y1: y, y2: y, class: "grid" }),
      svg("text", { x: PAD.left - 6, y: y + 4, "text-anchor": "end", class: "tick" }, format(yMax * fraction)),
    );
  }
}

// series: [{name, points: [{t (ms), v}]}]; `now` is the right edge, `span` ms wide.
export function lineChart({ title, series, now, span, format }) {
  const description = series.length
    ? series.map((s) => `${s.name}: ${format(s.points.at(-1)?.v ?? 0)} now`).join("; ")
    : "no samples yet";
  const root = frame(title, description);
  const yMax = Math.max(1e-9, ...series.flatMap((s) => s.points.map((p) => p.v)));
  axis(root, yMax, format);
  const plotWidth = WIDTH - PAD.left - PAD.right;
  const plotHeight = HEIGHT - PAD.top - PAD.bottom;
  const x = (t) => PAD.left + plotWidth * (1 - Math.min(1, Math.max(0, (now - t) / span)));
  const y = (v) => PAD.top + plotHeight * (1 - v / yMax);
  series.forEach((s, i) => {
    if (!s.points.length) return;
    // A step line: usage holds its value until the next sample.
    let d = `M ${x(s.points[0].t)} ${y(s.points[0].v)}`;
    for (let p = 1; p < s.points.length; p += 1) {
      d += ` H ${x(s.points[p].t)} V ${y(s.points[p].v)}`;
    }
    d += ` H ${x(now)}`;
    root.append(svg("path", { d, class: "series", stroke: PALETTE[i % PALETTE.length] }, svg("title", {}, s.name)));
  });
  root.append(
    svg("text", { x: PAD.left, y: HEIGHT - 8, class: "tick" }, `${Math.round(span / 60000)} min ago`),
    svg("text", { x: WIDTH - PAD.right, y: HEIGHT - 8, "text-anchor": "end", class: "tick" }, "now"),
  );
  const legend = h(
    "ul",
    { class: "legend" },
    series.map((s, i) =>
      h("li", {}, h("span", { class: `swatch swatch-${i % PALETTE.length}`, "aria-hidden": "true" }), s.name),
    ),
  );
  return h("figure", { class: "chart-figure" }, h("figcaption", {}, title), root, legend);
}

// bins: [{from, to, count}] (seconds).
export function histogramChart({ title, bins, total }) {
  const described = bins.filter((b) => b.count).map((b) => `${duration(b.from)}–${duration(b.to)}: ${b.count}`);
  const root = frame(title, total ? `${total} admitted workloads. ${described.join("; ")}` : "no admitted workloads yet");
  const yMax = Math.max(1, ...bins.map((b) => b.count));
  axis(root, yMax, (v) => (Number.isInteger(v) ? String(v) : v.toFixed(1)));
  const plotWidth = WIDTH - PAD.left - PAD.right;
  const plotHeight = HEIGHT - PAD.top - PAD.bottom;
  const barWidth = plotWidth / Math.max(1, bins.length);
  bins.forEach((bin, i) => {
    const barHeight = (plotHeight * bin.count) / yMax;
    root.append(
      svg(
        "rect",
        { x: PAD.left + i * barWidth + 1, y: PAD.top + plotHeight - barHeight, width: Math.max(1, barWidth - 2), height: barHeight, class: "hist-bar" },
        svg("title", {}, `${duration(bin.from)}–${duration(bin.to)}: ${bin.count}`),
      ),
    );
  });
  if (bins.length) {
    root.append(
      svg("text", { x: PAD.left, y: HEIGHT - 8, class: "tick" }, duration(bins[0].from)),
      svg("text", { x: WIDTH - PAD.right, y: HEIGHT - 8, "text-anchor": "end", class: "tick" }, duration(bins.at(-1).to)),
    );
  }
  return h("figure", { class: "chart-figure" }, h("figcaption", {}, title), root);
}
