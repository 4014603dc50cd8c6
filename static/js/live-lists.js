/* Arbiter: live lists. The case queue and the review inbox show new and changed items without a
   reload, and never move the row under the pointer or the one that has the focus.

   Every few seconds the page asks /live/changes/ for the tenant's "changed since" token (one
   indexed query). Only when it differs does it fetch the page again and compare rows by id:
   - a changed row is updated in place, cell by cell (a cell holding the focus is left as it is);
   - a row that left the list (decided, taken elsewhere) is marked, not removed;
   - new rows are not inserted by themselves: a bar at the bottom of the screen says "N new" and
     inserts them when asked, so nothing shifts under the pointer or the focus.
   Without JavaScript the lists are as they were when loaded; a reload shows everything. */
(function () {
  "use strict";

  var LISTS = {
    queue: { rows: "#case-results tbody > tr[id]", body: "#case-results tbody" },
    inbox: { rows: ".workspace-list tbody > tr.review-row[id]", body: ".workspace-list tbody" }
  };

  function config() {
    var root = document.querySelector("[data-live-list]");
    if (!root) { return null; }
    var list = LISTS[root.getAttribute("data-live-list")];
    if (!list) { return null; }
    return { root: root, list: list, url: root.getAttribute("data-live-url"),
             seconds: Math.max(1, parseInt(root.getAttribute("data-live-seconds"), 10) || 10) };
  }

  var token = null;
  var pending = [];  // new rows, in the fetched list's order, waiting for "show"
  var busy = false;

  function bar() { return document.getElementById("live-bar"); }

  function showBar(count) {
    var element = bar();
    if (!element) { return; }
    var button = element.querySelector("button");
    button.textContent = count + " new " + (count === 1 ? "item" : "items") + " — show";
    element.hidden = count === 0;
  }

  function updateRow(row, fresh) {
    var cells = row.children, freshCells = fresh.children;
    if (cells.length !== freshCells.length) { return; }
    var active = document.activeElement;
    var changed = false;
    for (var i = freshCells.length - 1; i >= 0; i--) {
      var cell = cells[i];
      if (cell.contains(active) || cell.innerHTML === freshCells[i].innerHTML) { continue; }
      var copy = document.importNode(freshCells[i], true);
      cell.replaceWith(copy);
      changed = true;
    }
    row.classList.remove("is-gone");
    if (changed) {
      row.classList.add("is-updated");
      if (window.htmx) { window.htmx.process(row); }
      window.setTimeout(function () { row.classList.remove("is-updated"); }, 2500);
    }
  }

  function merge(conf, html) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    var freshRows = Array.prototype.slice.call(doc.querySelectorAll(conf.list.rows));
    var current = {};
    document.querySelectorAll(conf.list.rows).forEach(function (row) { current[row.id] = row; });
    var seen = {};
    pending = [];
    freshRows.forEach(function (fresh, index) {
      seen[fresh.id] = true;
      var row = current[fresh.id];
      if (row) { updateRow(row, fresh); return; }
      pending.push({ row: fresh, after: index > 0 ? freshRows[index - 1].id : null });
    });
    Object.keys(current).forEach(function (id) {
      if (!seen[id] && !current[id].classList.contains("is-gone")) {
        current[id].classList.add("is-gone");
        current[id].setAttribute("title", "No longer in this list: it changed elsewhere. Reload to tidy the list.");
      }
    });
    showBar(pending.length);
  }

  function showPending() {
    var conf = config();
    if (!conf) { return; }
    var body = document.querySelector(conf.list.body);
    if (!body) { window.location.reload(); return; }
    var inserted = [];
    pending.forEach(function (item) {
      if (document.getElementById(item.row.id)) { return; }
      var row = document.importNode(item.row, true);
      row.classList.remove("is-selected");
      row.classList.add("is-new");
      var after = item.after && document.getElementById(item.after);
      if (after && after.parentNode === body) { after.after(row); } else { body.insertBefore(row, body.firstChild); }
      if (window.htmx) { window.htmx.process(row); }
      inserted.push(row);
    });
    pending = [];
    showBar(0);
    var first = inserted[0] && inserted[0].querySelector("a[href]");
    if (first) { first.focus(); }
  }

  function refresh(conf) {
    return fetch(window.location.href, { credentials: "same-origin", headers: { "X-Live-Refresh": "1" } })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) { if (html) { merge(conf, html); } });
  }

  function poll() {
    var conf = config();
    if (!conf || busy || document.hidden) { return; }
    busy = true;
    fetch(conf.url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (answer) {
        if (!answer) { return null; }
        var changed = token !== null && answer.token !== token;
        token = answer.token;
        return changed ? refresh(conf) : null;
      })
      .catch(function () { return null; })
      .then(function () { busy = false; });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var conf = config();
    if (!conf) { return; }
    var element = bar();
    if (element) { element.querySelector("button").addEventListener("click", showPending); }
    poll();  // the first answer only sets the token the page was rendered with
    window.setInterval(poll, conf.seconds * 1000);
  });
})();
