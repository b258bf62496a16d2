// DOM helpers shared by the inspector's views. Every text from a capture goes in as
// text (textContent), never as HTML.

export const CLIP = 2000; // characters of a long string a JSON view shows at first

// el("div", {class: "x", onclick: f}, child, "text", ...): an element.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// A value as pretty JSON; strings longer than CLIP are cut (the "show all" button
// shows the whole value).
export function json(value, attrs = {}) {
  const pre = el("pre", { class: "json", ...attrs });
  const full = JSON.stringify(value, null, 2) ?? "undefined";
  const clipped = JSON.stringify(clipStrings(value), null, 2) ?? "undefined";
  pre.textContent = clipped;
  if (clipped !== full) {
    const more = el("button", { class: "more", type: "button" }, "show all");
    more.addEventListener("click", () => {
      pre.textContent = full;
      more.remove();
    });
    return el("div", { class: "json-wrap" }, pre, more);
  }
  return pre;
}

function clipStrings(value) {
  if (typeof value === "string") {
    return value.length > CLIP ? `${value.slice(0, CLIP)}… (${value.length - CLIP} more characters)` : value;
  }
  if (Array.isArray(value)) return value.map(clipStrings);
  if (value && typeof value === "object") {
    const out = {};
    for (const [key, item] of Object.entries(value)) out[key] = clipStrings(item);
    return out;
  }
  return value;
}

// A <details> whose body is made when it is first opened (big captures stay fast).
export function details(summary, body, { open = false, attrs = {} } = {}) {
  const node = el("details", attrs, el("summary", {}, summary));
  let made = false;
  const make = () => {
    if (made) return;
    made = true;
    append(node, [typeof body === "function" ? body() : body]);
  };
  node.addEventListener("toggle", () => node.open && make());
  if (open) {
    node.open = true;
    make();
  }
  return node;
}

export function section(title, attrs, ...children) {
  return el("section", attrs, el("h2", {}, title), ...children);
}

// A table: headers, then rows (arrays of cells: a Node, text, or {node, class}).
export function table(headers, rows, attrs = {}) {
  const head = el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h))));
  const body = el("tbody", {});
  for (const row of rows) {
    const tr = el("tr", row.attrs || {});
    for (const cell of row.cells || row) {
      if (cell && typeof cell === "object" && !(cell instanceof Node) && "node" in cell) {
        tr.append(el("td", { class: cell.class }, cell.node));
      } else {
        tr.append(el("td", {}, cell));
      }
    }
    body.append(tr);
  }
  return el("table", attrs, head, body);
}

export function seconds(value) {
  if (value === null || value === undefined) return "–";
  if (Math.abs(value) < 1) return `${(value * 1000).toFixed(1)} ms`;
  return `${value.toFixed(3)} s`;
}

export function bytes(value) {
  if (value === null || value === undefined) return "–";
  if (value < 1024) return `${value} B`;
  if (value < 1024 * 1024) return `${(value / 1024).toFixed(1)} KiB`;
  return `${(value / 1024 / 1024).toFixed(2)} MiB`;
}

export function show(value) {
  return value === null || value === undefined ? "–" : String(value);
}
