/**
 * The device's IndexedDB database: one per device name in an origin (`deviceDatabase`), with
 * one object store per kind of record ("budget": src/budget.ts, "identity": src/identity.ts).
 * Every write is a transaction with "strict" durability: it reaches the disk before it
 * completes, so nothing the device acted on (a spent token, a spent epsilon) is lost to a
 * closed tab.
 */

/**
 * The device could not keep a record it must keep before it acts (the browser's storage for the
 * site is full or refused, as in a private window with its quota spent): what it was keeping,
 * what that means for the device, and the store's own error as `cause`.
 */
export class StorageError extends Error {
  override name = "StorageError";

  constructor(what: string, consequence: string, cause: unknown) {
    super(`${what} could not be saved (${describeError(cause)}; the browser's storage for ` +
          `this site may be full or refused): ${consequence}`, { cause });
  }
}

/** An error's name and message ("QuotaExceededError: ..."), or what was thrown. */
export function describeError(error: unknown): string {
  if (error instanceof Error || (typeof DOMException !== "undefined" && error instanceof DOMException)) {
    const e = error as Error;
    return e.message === "" ? e.name : `${e.name}: ${e.message}`;
  }
  return String(error);
}

/** The object stores of a device database (version 2 added "identity"). */
const STORES = ["budget", "identity"] as const;
const VERSION = 2;

/** The database of the device called `name` ("fedhh-device" for the unnamed one). */
export function deviceDatabase(name = ""): string {
  return name === "" ? "fedhh-device" : `fedhh-device/${name}`;
}

function open(database: string): Promise<IDBDatabase> {
  return new Promise((resolve, reject) => {
    const request = indexedDB.open(database, VERSION);
    request.onupgradeneeded = () => {
      for (const store of STORES) {
        if (!request.result.objectStoreNames.contains(store)) {
          request.result.createObjectStore(store);
        }
      }
    };
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => {
      // A database past this code's version was upgraded by a newer bundle of the page: this
      // one is older (a cached copy, or the operator rolled the site back). Before, the page
      // showed the browser's "VersionError: The requested version (2) is less than the
      // existing version (3).", every load, and nothing on what to do.
      const error = request.error;
      reject(error?.name === "VersionError"
        ? new Error(`${database} was last kept by a newer version of this page's device code ` +
                    `(${describeError(error)}; this code reads version ${VERSION}): reload the ` +
                    "page (if this persists, the site or a cache still serves an older bundle: " +
                    "the operator must serve the current one); the storage is left as it is",
                    { cause: error })
        : error);
    };
    // (before, "... is held open at an older version", with nothing on what holds it or what to
    // do)
    request.onblocked = () => reject(new Error(
      `${database} is held open at an older version by another tab of this site (one still ` +
      "running an older version of this page): close the site's other tabs, then reload this " +
      "one"));
  });
}

/** The record under `key` in `store`, or undefined. */
export async function idbGet(database: string, store: string, key: string): Promise<unknown> {
  const db = await open(database);
  try {
    return await new Promise((resolve, reject) => {
      const request = db.transaction(store, "readonly").objectStore(store).get(key);
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
  } finally {
    db.close();
  }
}

/** Writes (or, with `value` undefined, deletes) the record under `key`, durably. */
export async function idbPut(database: string, store: string, key: string,
                             value: unknown): Promise<void> {
  const db = await open(database);
  try {
    await new Promise<void>((resolve, reject) => {
      const tx = db.transaction(store, "readwrite", { durability: "strict" });
      if (value === undefined) tx.objectStore(store).delete(key);
      else tx.objectStore(store).put(value, key);
      tx.oncomplete = () => resolve();
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error);
    });
  } finally {
    db.close();
  }
}
