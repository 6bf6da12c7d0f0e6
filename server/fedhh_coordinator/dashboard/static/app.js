// fedhh console: live regions (server-sent events) and the heavy-hitter filter.
// The server renders every region as escaped HTML; this script only puts it in place.
"use strict";

(function () {
  const body = document.body;

  // A row's item: its data-item holds it as the body of a JSON string, every character that
  // is not printable escaped (pages.filter_copy), so the page holds no raw control or
  // bidirectional character and the filter matches the exact item.
  function itemOf(row) {
    const copy = row.getAttribute("data-item") || "";
    try {
      return JSON.parse("\"" + copy + "\"");
    } catch (error) {
      return copy;
    }
  }

  function applyFilter() {
    const input = document.getElementById("hh-filter");
    if (!input) {
      return;
    }
    const needle = input.value.trim().toLowerCase();
    // A filter holding a lone surrogate (half of a UTF-16 pair) has no URL form: the download
    // links are withdrawn until the filter has one, never left on the previous filter (before,
    // encodeURIComponent threw after the rows were hidden, so the downloads kept the old one).
    let query = "";
    if (needle !== "") {
      try {
        query = "?q=" + encodeURIComponent(needle);
      } catch (error) {
        query = null;
      }
    }
    ["hh-csv", "hh-json"].forEach(function (id) {
      const link = document.getElementById(id);
      if (!link) {
        return;
      }
      if (!link.hasAttribute("data-base")) {
        link.setAttribute("data-base", link.getAttribute("href").split("?")[0]);
      }
      if (query === null) {
        link.removeAttribute("href");
        link.setAttribute("aria-disabled", "true");
        link.title = "This filter holds a lone surrogate (half of a UTF-16 pair), which a " +
          "link cannot carry: no download until the filter changes.";
      } else {
        link.href = link.getAttribute("data-base") + query;
        link.removeAttribute("aria-disabled");
        link.removeAttribute("title");
      }
    });
    let shown = 0;
    document.querySelectorAll("table.hits tbody tr").forEach(function (row) {
      const item = itemOf(row).toLowerCase();
      const match = needle === "" || item.indexOf(needle) !== -1;
      row.hidden = !match;
      shown += match ? 1 : 0;
    });
    body.setAttribute("data-shown", String(shown));
  }

  function listen(url) {
    const source = new EventSource(url);
    source.addEventListener("region", function (event) {
      const update = JSON.parse(event.data);
      const target = document.getElementById(update.id);
      if (target) {
        target.innerHTML = update.html;
      }
      if (update.id === "hits") {
        applyFilter();
      }
    });
    source.addEventListener("synced", function () {
      body.setAttribute("data-live-state", "synced");
    });
    source.addEventListener("signed-out", function () {
      source.close();
      window.location.assign("/login?next=" + encodeURIComponent(window.location.pathname));
    });
    source.addEventListener("error", function () {
      body.setAttribute("data-live-state", "reconnecting");
    });
    return source;
  }

  const filter = document.getElementById("hh-filter");
  if (filter) {
    filter.addEventListener("input", applyFilter);
  }
  const live = body.getAttribute("data-live");
  if (live && window.EventSource) {
    // A stream holds one of the few connections a browser keeps per site: close it when the
    // page is left (even into the back-forward cache), open a new one if the page comes back.
    let source = listen(live);
    window.addEventListener("pagehide", function () {
      source.close();
    });
    window.addEventListener("pageshow", function (event) {
      if (event.persisted) {
        source = listen(live);
      }
    });
  }
})();
