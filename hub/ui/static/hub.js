// Talking to the hub that served the page: REST calls with the signed-in token, NDJSON
// streams (watches and logs) read as they arrive, and LiveList — list, then watch from the
// list's resourceVersion, then again after a broken stream — which every page uses to stay
// current. Nothing here knows about the DOM.
// Called by app.js (sign-in) and the page modules.

export const API = "/apis/multiq.dev/v1alpha1";
const TOKEN_KEY = "multiq.token";
const RETRY_MS = [500, 1000, 2000, 5000];

export class HubError extends Error {
  constructor(status, message, reason) {
    super(message);
    this.status = status;
    this.reason = reason;
  }
}

export function savedToken() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function saveToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export function collectionPath(plural, namespace) {
  return namespace ? `${API}/namespaces/${encodeURIComponent(namespace)}/${plural}` : `${API}/${plural}`;
}

export function objectPath(plural, namespace, name) {
  return `${collectionPath(plural, namespace)}/${encodeURIComponent(name)}`;
}

export class Hub {
  constructor(token) {
    this.token = token;
    this.onUnauthorized = () => {};
  }

  headers(extra = {}) {
    return { Authorization: `Bearer ${this.token}`, ...extra };
  }

  async request(method, path, body, signal) {
    const init = { method, headers: this.headers(), signal };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(path, init);
    if (!response.ok) throw await this.failure(response);
    return response.json();
  }

  async failure(response) {
    let message = `${response.status} ${response.statusText}`;
    let reason = "";
    try {
      const status = await response.json();
      message = status.message || message;
      reason = status.reason || "";
    } catch {
      // Not a Kubernetes Status (a proxy's page, say): the status line says enough.
    }
    if (response.status === 401) this.onUnauthorized(message);
    return new HubError(response.status, message, reason);
  }

  get(path, signal) {
    return this.request("GET", path, undefined, signal);
  }

  delete(path) {
    return this.request("DELETE", path);
  }

  put(path, body) {
    return this.request("PUT", path, body);
  }

  // Each JSON line of a streamed response, as it arrives, until the stream ends or `signal`
  // aborts. A failed request throws HubError before the first line.
  async *stream(path, signal) {
    const response = await fetch(path, { headers: this.headers(), signal });
    if (!response.ok) throw await this.failure(response);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let newline;
        while ((newline = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, newline).trim();
          buffer = buffer.slice(newline + 1);
          if (line) yield JSON.parse(line);
        }
      }
      if (buffer.trim()) yield JSON.parse(buffer);
    } finally {
      reader.releaseLock();
    }
  }
}

// The objects of one plural (in one namespace, or every namespace the caller may read), kept
// current: a list, then a watch from its resourceVersion; when the watch ends or fails, a new
// list and watch after a growing pause. Listeners get (items Map, changes) where changes is
// "reset" after a list, or the array of watch events applied since the last call — delivered
// once per animation frame however many events arrived, so 10,000 quick changes cost one
// render, not 10,000.
//
// A browser opens at most six HTTP/1.1 connections to one host, and every watch holds one
// for as long as it runs: kinds that change seldom (queues, tenants) are listed every
// `pollMs` instead, so the watches, a log stream and the page's own requests always fit.
export class LiveList {
  constructor(hub, plural, { namespace = null, pollMs = 0 } = {}) {
    this.hub = hub;
    this.plural = plural;
    this.namespace = namespace;
    this.pollMs = pollMs;
    this.items = new Map();
    this.listeners = new Set();
    this.loaded = false;
    this.error = null;
    this.pending = [];
    this.scheduled = false;
    this.controller = null;
    this.stopped = true;
  }

  static key(obj) {
    const meta = obj.metadata || {};
    return meta.namespace ? `${meta.namespace}/${meta.name}` : meta.name;
  }

  subscribe(listener) {
    this.listeners.add(listener);
    if (this.loaded) listener(this.items, "reset");
    return () => this.listeners.delete(listener);
  }

  start() {
    if (!this.stopped) return this;
    this.stopped = false;
    this.run();
    return this;
  }

  stop() {
    this.stopped = true;
    this.controller?.abort();
  }

  async run() {
    let attempt = 0;
    const path = collectionPath(this.plural, this.namespace);
    while (!this.stopped) {
      this.controller = new AbortController();
      const signal = this.controller.signal;
      try {
        const list = await this.hub.get(path, signal);
        this.reset(list.items || []);
        const since = list.metadata?.resourceVersion || "";
        attempt = 0;
        if (this.pollMs) {
          await new Promise((resolve) => setTimeout(resolve, this.pollMs));
          continue;
        }
        for await (const event of this.hub.stream(`${path}?watch=1&resourceVersion=${since}`, signal)) {
          this.apply(event);
        }
      } catch (error) {
        if (this.stopped || error.name === "AbortError") return;
        this.error = error;
        this.notify("error");
        // Signed out (or the token revoked): nothing to retry with.
        if (error instanceof HubError && (error.status === 401 || error.status === 403)) return;
      }
      if (this.stopped) return;
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS[Math.min(attempt, RETRY_MS.length - 1)]));
      attempt += 1;
    }
  }

  reset(items) {
    this.items = new Map(items.map((obj) => [LiveList.key(obj), obj]));
    this.loaded = true;
    this.error = null;
    this.pending = [];
    this.notify("reset");
  }

  // One watch event: ADDED/MODIFIED replace the object, DELETED removes it.
  apply(event) {
    const obj = event.object;
    if (!obj || !obj.metadata) return;
    const key = LiveList.key(obj);
    if (event.type === "DELETED") this.items.delete(key);
    else this.items.set(key, obj);
    this.pending.push({ type: event.type, key, object: obj });
    if (!this.scheduled) {
      this.scheduled = true;
      requestAnimationFrame(() => {
        this.scheduled = false;
        const changes = this.pending;
        this.pending = [];
        this.notify(changes);
      });
    }
  }

  notify(changes) {
    for (const listener of this.listeners) listener(this.items, changes);
  }
}
