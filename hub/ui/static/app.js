// The dashboard's shell: sign-in with a token (kept in sessionStorage, so it lives as long as
// the tab), the session's shared live lists, the hash router (#/fleet, #/queues, #/workloads,
// #/workloads/NS/NAME) and the navigation. Each page module exports mount(container, session,
// params) and returns a function that unmounts it.
// Loaded by index.html.

import { announce } from "./dom.js";
import { Hub, HubError, LiveList, API, savedToken, saveToken } from "./hub.js";
import { UsageSampler } from "./queues.js";
import * as fleet from "./fleet.js";
import * as queues from "./queues.js";
import * as workloads from "./workloads.js";
import * as workload from "./workload.js";

const PAGES = [
  { pattern: /^#\/workloads\/([^/]+)\/([^/]+)$/, page: workload, nav: "workloads", title: "Workload" },
  { pattern: /^#\/workloads$/, page: workloads, nav: "workloads", title: "Workloads" },
  { pattern: /^#\/queues$/, page: queues, nav: "queues", title: "Queues" },
  { pattern: /^#\/fleet$/, page: fleet, nav: "fleet", title: "Fleet" },
];

// Watched as they change; every other kind is listed every POLL_MS (see LiveList: a browser
// holds at most six connections to the hub, and each watch keeps one).
const WATCHED = new Set(["workloads", "memberclusters"]);
const POLL_MS = 5000;

// What every page shares while signed in: one watch per kind, whatever page is open.
export class Session {
  constructor(hub, me) {
    this.hub = hub;
    // Who signed in, as the hub says (GET whoami): the pages offer only what they may do.
    this.me = me;
    this.lists = new Map();
    // Sampled from sign-in on, so the chart has a history when the Queues page opens.
    this.usage = new UsageSampler(this);
    this.usage.start();
  }

  // Whether the signed-in user may change objects in this namespace (null: cluster-scoped).
  mayChange(namespace) {
    if (this.me.admin) return true;
    const writable = this.me.writableNamespaces;
    return namespace != null && (writable === null || writable.includes(namespace));
  }

  list(plural) {
    if (!this.lists.has(plural)) {
      const pollMs = WATCHED.has(plural) ? 0 : POLL_MS;
      this.lists.set(plural, new LiveList(this.hub, plural, { pollMs }).start());
    }
    return this.lists.get(plural);
  }

  close() {
    this.usage.stop();
    for (const list of this.lists.values()) list.stop();
    this.lists.clear();
  }
}

let session = null;
let unmount = null;

function $(id) {
  return document.getElementById(id);
}

function showSignIn(message = "") {
  session?.close();
  session = null;
  unmount?.();
  unmount = null;
  $("page").replaceChildren();
  $("nav").hidden = true;
  $("session").hidden = true;
  $("sign-in").hidden = false;
  $("sign-in-error").textContent = message;
  document.title = "Sign in · MultiQ";
  $("token").focus();
}

async function signIn(token) {
  const hub = new Hub(token);
  // Who the token belongs to; a bad token is refused here.
  const me = await hub.get(`${API}/whoami`);
  saveToken(token);
  hub.onUnauthorized = (message) => {
    saveToken(null);
    showSignIn(`Signed out: ${message}`);
  };
  session = new Session(hub, me);
  $("sign-in").hidden = true;
  $("nav").hidden = false;
  $("session").hidden = false;
  watchConnection();
  route();
}

function watchConnection() {
  const badge = $("connection");
  session.list("workloads").subscribe((_, changes) => {
    const broken = changes === "error";
    badge.textContent = broken ? "reconnecting" : "live";
    badge.className = `badge ${broken ? "badge-warn" : "badge-ok"}`;
  });
}

function route() {
  if (!session) return;
  const hash = location.hash || "#/fleet";
  const match = PAGES.map((p) => ({ ...p, found: p.pattern.exec(hash) })).find((p) => p.found);
  if (!match) {
    location.replace("#/fleet");
    return;
  }
  unmount?.();
  const container = $("page");
  container.replaceChildren();
  const params = match.found.slice(1).map(decodeURIComponent);
  unmount = match.page.mount(container, session, params);
  for (const link of document.querySelectorAll("#nav a")) {
    if (link.dataset.page === match.nav) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = `${params.at(-1) || match.title} · MultiQ`;
  announce(`${match.title} page`);
  // Move focus to the new page's heading, as a page load would.
  container.querySelector("h1")?.focus();
}

function start() {
  $("sign-in-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const token = $("token").value.trim();
    try {
      await signIn(token);
      $("token").value = "";
    } catch (error) {
      const message = error instanceof HubError && error.status === 401 ? "That token is not valid." : error.message;
      $("sign-in-error").textContent = message;
    }
  });
  $("sign-out").addEventListener("click", () => {
    saveToken(null);
    showSignIn();
  });
  window.addEventListener("hashchange", route);
  const token = savedToken();
  if (token) signIn(token).catch((error) => showSignIn(error.message));
  else showSignIn();
}

start();
