// A sortable table that renders only the rows in view (plus a few either side), so 10,000
// rows cost what 40 do: a fixed row height, a body as tall as every row, and a pool of row
// elements moved and refilled as the viewport scrolls. The header is real buttons (sorting by
// keyboard too, aria-sort says which); rows carry aria-rowindex so assistive technology knows
// where in the whole list a visible row sits.
// Called by workloads.js (the workload list); setRows is fed from LiveList's changes.

import { h } from "./dom.js";

const OVERSCAN = 8;

export class VirtualTable {
  // columns: [{key, label, width (a CSS grid track), text(row) → string, href(row)?}]; a
  // column with href shows its text as a link.
  constructor({ columns, rowHeight = 32, caption, onSort = () => {} }) {
    this.columns = columns;
    this.rowHeight = rowHeight;
    this.rows = [];
    this.sortKey = null;
    this.sortDescending = false;
    this.onSort = onSort;
    this.pool = [];
    this.first = -1;
    this.last = -1;
    this.frame = 0;

    this.header = h("div", { class: "vt-row vt-head", role: "row", "aria-rowindex": 1 });
    this.sortButtons = new Map();
    for (const column of columns) {
      // The arrow is for the eye; aria-sort on the header says the same to assistive technology.
      const button = h(
        "button",
        { type: "button", class: "vt-sort", onclick: () => this.sortBy(column.key) },
        column.label,
        h("span", { class: "vt-arrow", "aria-hidden": "true" }),
      );
      this.sortButtons.set(column.key, button);
      this.header.append(
        h("div", { class: `vt-cell col-${column.key}`, role: "columnheader", "aria-sort": "none" }, button),
      );
    }
    // The scrolling box holds the whole table (header sticky at its top), so the table's
    // children are only rowgroups and rows; the box is focusable so the keyboard scrolls it.
    this.body = h("div", { class: "vt-body", role: "rowgroup" });
    this.table = h(
      "div",
      { class: "vt-table", role: "table", "aria-label": caption, "aria-rowcount": 1 },
      h("div", { role: "rowgroup", class: "vt-headgroup" }, this.header),
      this.body,
    );
    this.viewport = h(
      "div",
      { class: "vt vt-viewport", tabindex: 0, role: "region", "aria-label": `${caption}, scrollable` },
      this.table,
    );
    this.element = this.viewport;
    this.element.style.setProperty("--vt-columns", columns.map((c) => c.width || "1fr").join(" "));
    this.element.style.setProperty("--vt-row-height", `${rowHeight}px`);
    this.viewport.addEventListener("scroll", () => this.schedule(), { passive: true });
    new ResizeObserver(() => this.schedule()).observe(this.viewport);
  }

  sortBy(key, descending) {
    this.sortDescending = descending ?? (this.sortKey === key ? !this.sortDescending : false);
    this.sortKey = key;
    for (const [columnKey, button] of this.sortButtons) {
      const state = columnKey !== key ? "none" : this.sortDescending ? "descending" : "ascending";
      button.parentElement.setAttribute("aria-sort", state);
      button.lastChild.textContent = { none: "", ascending: " ▲", descending: " ▼" }[state];
    }
    this.onSort(key, this.sortDescending);
  }

  // The rows to show, already filtered and sorted by the caller.
  setRows(rows) {
    this.rows = rows;
    this.table.setAttribute("aria-rowcount", String(rows.length + 1));
    this.body.style.height = `${rows.length * this.rowHeight}px`;
    this.first = -1; // redraw every visible row: their contents may have changed
    this.render();
  }

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  render() {
    const top = this.viewport.scrollTop;
    const height = this.viewport.clientHeight || 600;
    const first = Math.max(0, Math.floor(top / this.rowHeight) - OVERSCAN);
    const last = Math.min(this.rows.length, Math.ceil((top + height) / this.rowHeight) + OVERSCAN);
    if (first === this.first && last === this.last) return;
    this.first = first;
    this.last = last;
    const needed = last - first;
    while (this.pool.length < needed) {
      const cells = this.columns.map((c) =>
        h("div", { class: `vt-cell col-${c.key}`, role: "cell" }, c.href ? h("a", { href: "#" }) : null),
      );
      const row = h("div", { class: "vt-row", role: "row" }, cells);
      this.pool.push({ row, cells, key: null });
      this.body.append(row);
    }
    for (let i = 0; i < this.pool.length; i += 1) {
      const slot = this.pool[i];
      const index = first + i;
      if (i >= needed) {
        slot.row.hidden = true;
        slot.key = null;
        continue;
      }
      const data = this.rows[index];
      slot.row.hidden = false;
      slot.row.style.transform = `translateY(${index * this.rowHeight}px)`;
      slot.row.setAttribute("aria-rowindex", String(index + 2));
      slot.row.dataset.key = data.key;
      this.columns.forEach((column, c) => {
        const text = column.text(data);
        const target = column.href ? slot.cells[c].firstChild : slot.cells[c];
        if (target.textContent !== text) target.textContent = text;
        if (column.href) target.setAttribute("href", column.href(data));
      });
      slot.key = data.key;
    }
  }

  // Keep the row of `key` in view (after sorting or following a link back).
  scrollTo(key) {
    const index = this.rows.findIndex((r) => r.key === key);
    if (index >= 0) this.viewport.scrollTop = index * this.rowHeight;
  }
}
