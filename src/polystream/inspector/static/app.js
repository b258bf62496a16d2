// The inspector page: a tab per capture, a diff of two captures, and (on a server)
// opening files and following the gateway's live streams.

import { renderCapture } from "ps/capture.js";
import { renderDiff } from "ps/diff.js";
import { renderStreams, serverTools } from "ps/server.js";
import { el } from "ps/view.js";

export function start(data) {
  const app = new Inspector(data);
  window.polystreamInspector = app;
  return app;
}

class Inspector {
  constructor(data) {
    if (data.format !== "polystream-inspect") throw new Error("not polystream inspector data");
    this.data = data;
    this.server = data.server;
    this.captures = [...data.captures];
    this.live = new Map(); // capture index -> stream id followed
    this.tab = this.captures.length ? "c0" : this.server?.streams ? "streams" : "none";
    document.getElementById("tools").replaceChildren(...serverTools(this));
    this.show(this.tab);
  }

  tabs() {
    const nav = document.getElementById("tabs");
    const tab = (key, label) =>
      el("button", { type: "button", role: "tab", dataset: { tab: key }, "aria-selected": String(this.tab === key), onclick: () => this.show(key) }, label);
    const list = this.captures.map((c, n) => tab(`c${n}`, `${n + 1}. ${c.name}${this.live.has(n) ? " ●" : ""}`));
    if (this.captures.length >= 2) list.push(tab("diff", "Diff"));
    if (this.server?.streams) list.push(tab("streams", "Live streams"));
    nav.replaceChildren(...list);
  }

  show(key) {
    if (key !== this.tab) window.scrollTo(0, 0);
    this.tab = key;
    this.tabs();
    const view = document.getElementById("view");
    if (key === "diff") view.replaceChildren(renderDiff(this.captures));
    else if (key === "streams") view.replaceChildren(renderStreams(this));
    else if (key.startsWith("c") && this.captures[+key.slice(1)]) {
      const n = +key.slice(1);
      view.replaceChildren(renderCapture(this.captures[n], n));
    } else {
      view.replaceChildren(el("p", { class: "empty" }, this.server?.decode ? "Open a capture file to inspect it." : "No capture."));
    }
  }

  add(capture) {
    this.captures.push(capture);
    this.show(`c${this.captures.length - 1}`);
    return this.captures.length - 1;
  }

  replace(n, capture) {
    this.captures[n] = capture;
    if (this.tab === `c${n}`) {
      const y = window.scrollY;
      this.show(this.tab);
      window.scrollTo(0, y);
    }
  }
}
