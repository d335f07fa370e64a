/*
 * Offline search for the docs site when it is opened from the file system (file://).
 *
 * Browsers refuse `new Worker(url)` for file:// pages, and Material for MkDocs runs its search
 * in a Web Worker. Its `offline` plugin would load a stand-in from a CDN; this file replaces
 * that (mkdocs.yml: extra.polyfills), so the built site needs no network at all.
 *
 * The stand-in runs the worker script in a hidden same-origin iframe: the iframe's
 * `postMessage` sends to the page, the page's messages arrive as `message` events on the
 * iframe's window, and `importScripts` appends script elements (it returns a promise, which the
 * search worker awaits; English search imports nothing). Messages are copied into the receiving
 * window's realm with that window's `structuredClone`, as a real worker's would be.
 *
 * The file name contains "iframe-worker": the offline plugin adds its CDN script only when no
 * polyfill of that name is configured.
 */
(function () {
  "use strict";

  function copyInto(realm, data) {
    if (typeof realm.structuredClone === "function") return realm.structuredClone(data);
    return data === undefined ? data : realm.JSON.parse(JSON.stringify(data));
  }

  class FrameWorker extends EventTarget {
    constructor(url) {
      super();
      this.onmessage = null;
      this.onerror = null;
      this.url = new URL(String(url), document.baseURI).href;
      this.frame = document.createElement("iframe");
      this.frame.hidden = true;
      this.frame.setAttribute("aria-hidden", "true");
      document.body.appendChild(this.frame);

      const host = this;
      const scope = this.frame.contentWindow;
      // A document of our own now, so that no late load of about:blank replaces it.
      scope.document.open();
      scope.document.write("<!DOCTYPE html><html><head></head><body></body></html>");
      scope.document.close();
      let markReady;
      this.ready = new Promise(function (resolve) { markReady = resolve; });

      // The worker's side of the channel, defined before its script runs.
      scope.postMessage = function (data) {
        const copy = copyInto(window, data);
        setTimeout(function () { host.receive(copy); }, 0);
      };
      scope.importScripts = function () {
        const urls = Array.prototype.slice.call(arguments);
        return urls.reduce(function (chain, src) {
          return chain.then(function () {
            return new Promise(function (resolve, reject) {
              const script = scope.document.createElement("script");
              script.src = new URL(src, host.url).href;
              script.onload = resolve;
              script.onerror = function () { reject(new Error("importScripts failed: " + src)); };
              scope.document.body.appendChild(script);
            });
          });
        }, Promise.resolve());
      };
      scope.addEventListener("error", function (event) { host.fail(event.message, event.error); });

      const script = scope.document.createElement("script");
      script.src = this.url;
      script.onload = function () { markReady(); };
      script.onerror = function () { host.fail("cannot load " + host.url); };
      scope.document.body.appendChild(script);
    }

    postMessage(data) {
      const scope = this.frame.contentWindow;
      if (!scope) return;
      this.ready.then(function () {
        scope.dispatchEvent(new scope.MessageEvent("message", { data: copyInto(scope, data) }));
      });
    }

    terminate() {
      this.frame.remove();
    }

    receive(data) {
      const event = new MessageEvent("message", { data: data });
      this.dispatchEvent(event);
      if (typeof this.onmessage === "function") this.onmessage(event);
    }

    fail(message, error) {
      const event = new ErrorEvent("error", { message: String(message), filename: this.url, error: error });
      this.dispatchEvent(event);
      if (typeof this.onerror === "function") this.onerror(event);
    }
  }

  // Material's search worker looks for this name on its parent to locate its language files.
  window.IFrameWorker = FrameWorker;
  if (location.protocol === "file:") window.Worker = FrameWorker;
})();
