import { OFREPApi, ErrorMessageMap, isEvaluationFailureResponse, handleEvaluationError, toResolutionDetails, OFREPApiUnauthorizedError, OFREPForbiddenError, OFREPApiTooManyRequestsError, OFREPApiFetchError, OFREPApiUnexpectedResponseError, OFREPApiError, toFlagMetadata } from '@openfeature/ofrep-core';
import { OpenFeatureEventEmitter, ErrorCode, StandardResolutionReasons, ClientProviderEvents, ProviderFatalError, OpenFeatureError, GeneralError } from '@openfeature/web-sdk';

/******************************************************************************
Copyright (c) Microsoft Corporation.

Permission to use, copy, modify, and/or distribute this software for any
purpose with or without fee is hereby granted.

THE SOFTWARE IS PROVIDED "AS IS" AND THE AUTHOR DISCLAIMS ALL WARRANTIES WITH
REGARD TO THIS SOFTWARE INCLUDING ALL IMPLIED WARRANTIES OF MERCHANTABILITY
AND FITNESS. IN NO EVENT SHALL THE AUTHOR BE LIABLE FOR ANY SPECIAL, DIRECT,
INDIRECT, OR CONSEQUENTIAL DAMAGES OR ANY DAMAGES WHATSOEVER RESULTING FROM
LOSS OF USE, DATA OR PROFITS, WHETHER IN AN ACTION OF CONTRACT, NEGLIGENCE OR
OTHER TORTIOUS ACTION, ARISING OUT OF OR IN CONNECTION WITH THE USE OR
PERFORMANCE OF THIS SOFTWARE.
***************************************************************************** */
/* global Reflect, Promise, SuppressedError, Symbol, Iterator */


function __awaiter(thisArg, _arguments, P, generator) {
    function adopt(value) { return value instanceof P ? value : new P(function (resolve) { resolve(value); }); }
    return new (P || (P = Promise))(function (resolve, reject) {
        function fulfilled(value) { try { step(generator.next(value)); } catch (e) { reject(e); } }
        function rejected(value) { try { step(generator["throw"](value)); } catch (e) { reject(e); } }
        function step(result) { result.done ? resolve(result.value) : adopt(result.value).then(fulfilled, rejected); }
        step((generator = generator.apply(thisArg, _arguments || [])).next());
    });
}

typeof SuppressedError === "function" ? SuppressedError : function (error, suppressed, message) {
    var e = new Error(message);
    return e.name = "SuppressedError", e.error = error, e.suppressed = suppressed, e;
};

var BulkEvaluationStatus;
(function (BulkEvaluationStatus) {
    BulkEvaluationStatus["SUCCESS_NO_CHANGES"] = "SUCCESS_NO_CHANGES";
    BulkEvaluationStatus["SUCCESS_WITH_CHANGES"] = "SUCCESS_WITH_CHANGES";
})(BulkEvaluationStatus || (BulkEvaluationStatus = {}));

/** Default cache TTL: 30 days in seconds. */
const DEFAULT_CACHE_TTL_SECONDS = 30 * 24 * 60 * 60;

/** Header names treated as auth credentials for cache key derivation (matched case-insensitively). */
const AUTH_HEADER_NAMES = new Set([
    'authorization',
    'api-key',
    'x-api-key',
    'x-auth-token',
    'x-access-token',
]);
function isAuthHeader(name) {
    return AUTH_HEADER_NAMES.has(name.toLowerCase());
}
/**
 * Serializes known auth headers from static and factory-supplied options for cache keying.
 * Rotating tokens will change the cache key on each rotation; stable credentials separate caches as intended.
 */
function deriveAuthCredential(options) {
    return __awaiter(this, void 0, void 0, function* () {
        var _a, _b, _c;
        const entries = [...((_a = options.headers) !== null && _a !== void 0 ? _a : []), ...((_c = (yield ((_b = options.headersFactory) === null || _b === void 0 ? void 0 : _b.call(options)))) !== null && _c !== void 0 ? _c : [])];
        const authHeaders = entries
            .filter(([name]) => isAuthHeader(name))
            .map(([name, value]) => [name.toLowerCase(), value])
            .sort(([a], [b]) => a.localeCompare(b));
        return JSON.stringify(authHeaders);
    });
}
/**
 * Default ADR-0009 cache-key generator: OFREP base URL, auth credential, bound domain, and targeting key.
 * The provider hashes the returned key material into `cacheKeyHash`.
 */
function defaultCacheKeyGenerator(input) {
    var _a, _b, _c;
    return JSON.stringify([input.url, (_a = input.auth) !== null && _a !== void 0 ? _a : '', (_b = input.domain) !== null && _b !== void 0 ? _b : '', (_c = input.targetingKey) !== null && _c !== void 0 ? _c : '']);
}

const SCHEMA_VERSION = 2;
const STORAGE_NS = 'ofrep-web-provider';
class Storage {
    constructor(cacheMode = 'local-cache-first', baseUrl, getAuthCredential, domain, cacheKeyGenerator = defaultCacheKeyGenerator, logger) {
        this._disabled = cacheMode === 'disabled';
        this._baseUrl = baseUrl;
        this._getAuthCredential = getAuthCredential;
        this._domain = domain;
        this._cacheKeyGenerator = cacheKeyGenerator;
        this._logger = logger;
    }
    get disabled() {
        return this._disabled;
    }
    _cacheKeyMaterial(context) {
        return __awaiter(this, void 0, void 0, function* () {
            const auth = yield this._getAuthCredential();
            return this._cacheKeyGenerator({
                url: this._baseUrl,
                auth: auth === '[]' ? undefined : auth,
                domain: this._domain || undefined,
                targetingKey: context.targetingKey,
                context,
            });
        });
    }
    /**
     * Hashes the ADR-0009 cache key material to a 16-char hex string.
     * Uses SHA-256 via crypto.subtle when available (secure contexts).
     * Falls back to a double-pass FNV-1a-32 in non-secure contexts where crypto.subtle is absent.
     */
    _hashInput(context) {
        return __awaiter(this, void 0, void 0, function* () {
            const input = yield this._cacheKeyMaterial(context);
            if (typeof crypto !== 'undefined' && crypto.subtle) {
                const encoded = new TextEncoder().encode(input);
                const hashBuffer = yield crypto.subtle.digest('SHA-256', encoded);
                const hashArray = Array.from(new Uint8Array(hashBuffer));
                return hashArray
                    .map((b) => b.toString(16).padStart(2, '0'))
                    .join('')
                    .slice(0, 16);
            }
            return this._fnvHash(input);
        });
    }
    /**
     * Double-pass FNV-1a-32 producing a 16-char hex string.
     * Used as a fallback when crypto.subtle is unavailable (non-secure contexts).
     */
    _fnvHash(input) {
        const fnv1a32 = (str, offset) => {
            let h = offset >>> 0;
            for (let i = 0; i < str.length; i++) {
                h ^= str.charCodeAt(i);
                h = Math.imul(h, 0x01000193) >>> 0;
            }
            return h;
        };
        const lo = fnv1a32(input, 0x811c9dc5);
        const hi = fnv1a32(input, 0x27d4eb2f);
        return lo.toString(16).padStart(8, '0') + hi.toString(16).padStart(8, '0');
    }
    _formatStorageKey(cacheKeyHash) {
        return `${STORAGE_NS}:v${SCHEMA_VERSION}:${cacheKeyHash}`;
    }
    /**
     * Returns the localStorage key for the given evaluation context.
     * Format: `ofrep-web-provider:v{version}:{hash}`
     */
    getStorageKey(context) {
        return __awaiter(this, void 0, void 0, function* () {
            return this._formatStorageKey(yield this._hashInput(context));
        });
    }
    /**
     * Persists the flag cache alongside its ETag and a write timestamp.
     * No-op when cacheMode is 'disabled'. Storage write failures are logged and swallowed
     * so the provider continues operating with the fresh in-memory values.
     */
    store(context, flags, etag, metadata, eventStreams) {
        return __awaiter(this, void 0, void 0, function* () {
            var _a;
            if (this._disabled)
                return;
            try {
                const cacheKeyHash = yield this._hashInput(context);
                const key = this._formatStorageKey(cacheKeyHash);
                const entry = Object.assign(Object.assign({ version: SCHEMA_VERSION, cacheKeyHash,
                    etag, writtenAt: new Date().toISOString(), data: flags }, (metadata !== undefined && { metadata })), (eventStreams !== undefined && { eventStreams }));
                localStorage.setItem(key, JSON.stringify(entry));
            }
            catch (error) {
                (_a = this._logger) === null || _a === void 0 ? void 0 : _a.error(`Error storing flag cache in local storage: ${error}`);
            }
        });
    }
    /**
     * Loads a previously persisted entry.
     * Returns `undefined` when:
     *  - cacheMode is 'disabled'
     *  - no entry exists for this context
     *  - the schema version does not match
     *  - the entry is older than `ttlSeconds` (expired entries are removed from storage)
     */
    retrieve(context, ttlSeconds) {
        return __awaiter(this, void 0, void 0, function* () {
            var _a;
            if (this._disabled)
                return undefined;
            try {
                const raw = localStorage.getItem(yield this.getStorageKey(context));
                if (!raw)
                    return undefined;
                const entry = JSON.parse(raw);
                // Discard entries from a different schema version.
                if (entry.version !== SCHEMA_VERSION)
                    return undefined;
                // Enforce TTL — treat expired entries as a cache miss and evict them.
                const writtenAt = new Date(entry.writtenAt).getTime();
                if (Number.isNaN(writtenAt) || Date.now() - writtenAt > ttlSeconds * 1000) {
                    yield this.clear(context);
                    return undefined;
                }
                return { flags: entry.data, etag: entry.etag, metadata: entry.metadata, eventStreams: entry.eventStreams };
            }
            catch (error) {
                (_a = this._logger) === null || _a === void 0 ? void 0 : _a.error(`Error retrieving flag cache from local storage: ${error}`);
                return undefined;
            }
        });
    }
    /**
     * Removes the persisted entry for the given evaluation context.
     * No-op when cacheMode is 'disabled'.
     */
    clear(context) {
        return __awaiter(this, void 0, void 0, function* () {
            var _a;
            if (this._disabled)
                return;
            try {
                localStorage.removeItem(yield this.getStorageKey(context));
            }
            catch (error) {
                (_a = this._logger) === null || _a === void 0 ? void 0 : _a.error(`Error clearing flag cache from local storage: ${error}`);
            }
        });
    }
}

const DEFAULT_INACTIVITY_DELAY_SEC = 120;
const DEFAULT_GRACE_PERIOD_SEC = 30;
const DEBOUNCE_MS = 50;
// EventSource.CLOSED per the spec (avoids referencing the global in non-browser environments)
const ES_CLOSED = 2;
/**
 * Default parser: JSON-parses string payloads, otherwise passes the data through
 * as-is (e.g. when the EventSource implementation already deserialized it).
 */
const defaultSseEventParser = (event) => typeof event.data === 'string' ? JSON.parse(event.data) : event.data;
/**
 * Resolves the connection URL from an EventStream entry.
 * When `endpoint.origin` is absent, falls back to the origin of `baseUrl`.
 */
function resolveUrl(stream, baseUrl) {
    var _a;
    if (stream.url) {
        return stream.url;
    }
    if (stream.endpoint) {
        const origin = (_a = stream.endpoint.origin) !== null && _a !== void 0 ? _a : (baseUrl ? new URL(baseUrl).origin : undefined);
        if (!origin) {
            return undefined;
        }
        return new URL(stream.endpoint.requestUri, origin).href;
    }
    return undefined;
}
/**
 * Manages EventSource connections for real-time flag change notifications.
 * Handles connection lifecycle, event coalescing, and inactivity timeouts.
 */
class SseManager {
    constructor(_callbacks, _clientInactivityOverride, _logger, _baseUrl, 
    // Allows tests to inject a mock instead of the global EventSource
    _EventSourceImpl = EventSource, 
    // Overrides how incoming SSE payloads are parsed; defaults to JSON parsing
    _parseEvent = defaultSseEventParser) {
        this._callbacks = _callbacks;
        this._clientInactivityOverride = _clientInactivityOverride;
        this._logger = _logger;
        this._baseUrl = _baseUrl;
        this._EventSourceImpl = _EventSourceImpl;
        this._parseEvent = _parseEvent;
        this._connections = [];
        this._urls = new Set();
        this._disposed = false;
        this._stale = false;
        this._inactivityDelaySec = _clientInactivityOverride !== null && _clientInactivityOverride !== void 0 ? _clientInactivityOverride : DEFAULT_INACTIVITY_DELAY_SEC;
    }
    /**
     * Connect to SSE endpoints from eventStreams entries.
     * When the resolved URLs are identical to the current active connections, existing
     * connections are reused to avoid brief dark windows where events could be missed.
     */
    connect(eventStreams) {
        var _a, _b, _c;
        const sseStreams = eventStreams.filter((s) => s.type === 'sse');
        if (sseStreams.length === 0) {
            this.disconnect();
            return;
        }
        // Determine effective inactivity delay:
        // 1. Client override > 2. Server value > 3. Default (120s)
        const serverInactivity = (_a = sseStreams.find((s) => s.inactivityDelaySec != null)) === null || _a === void 0 ? void 0 : _a.inactivityDelaySec;
        this._inactivityDelaySec = (_c = (_b = this._clientInactivityOverride) !== null && _b !== void 0 ? _b : serverInactivity) !== null && _c !== void 0 ? _c : DEFAULT_INACTIVITY_DELAY_SEC;
        const urls = sseStreams.reduce((acc, stream) => {
            const url = resolveUrl(stream, this._baseUrl);
            if (url)
                acc.add(url);
            return acc;
        }, new Set());
        if (urls.size === 0) {
            this.disconnect();
            return;
        }
        // Diff URLs — skip teardown when connections are active and the set is unchanged
        const urlsUnchanged = this._connections.length > 0 && urls.size === this._urls.size && [...urls].every((u) => this._urls.has(u));
        if (urlsUnchanged) {
            return;
        }
        this.disconnect();
        this._urls = urls;
        urls.forEach((url) => this._connectToUrl(url));
        this._setupVisibilityHandler();
    }
    /**
     * Close all EventSource connections and clean up timers.
     */
    disconnect() {
        this._clearDebounce();
        this._clearInactivityTimer();
        this._clearGracePeriod();
        this._stale = false;
        this._removeVisibilityHandler();
        for (const conn of this._connections) {
            conn.close();
        }
        this._connections = [];
        this._urls = new Set();
    }
    /**
     * Full cleanup — disconnect and mark as disposed.
     */
    dispose() {
        this._disposed = true;
        this.disconnect();
    }
    /**
     * Whether the manager has active connections.
     */
    get isConnected() {
        return this._connections.length > 0;
    }
    /**
     * The set of currently connected URLs.
     */
    get connectedUrls() {
        return this._urls;
    }
    _connectToUrl(url) {
        if (this._disposed) {
            return;
        }
        const es = new this._EventSourceImpl(url);
        es.addEventListener('open', () => {
            // Connection (re)established — cancel grace period if active so we don't erroneously error
            if (this._stale) {
                this._clearGracePeriod();
                this._stale = false;
            }
        });
        es.addEventListener('message', (event) => {
            this._handleMessage(event);
        });
        es.addEventListener('error', () => {
            this._handleError(es);
        });
        this._connections.push(es);
    }
    _handleError(es) {
        var _a, _b;
        // readyState 2 (CLOSED) means the browser gave up — fatal error
        if (es.readyState === ES_CLOSED) {
            (_a = this._logger) === null || _a === void 0 ? void 0 : _a.warn('SSE connection closed permanently');
            this._clearGracePeriod();
            this._stale = false;
            // Clear connection state before invoking onError so that the backoff
            // retry's connect() call is not short-circuited by urlsUnchanged check.
            this._connections = [];
            this._urls = new Set();
            this._callbacks.onError();
            return;
        }
        // readyState EventSource.CONNECTING — transient error, browser is auto-reconnecting.
        // Enter grace period: emit STALE now, ERROR only if recovery doesn't happen.
        if (!this._stale) {
            this._stale = true;
            (_b = this._logger) === null || _b === void 0 ? void 0 : _b.info('SSE connection interrupted — entering grace period');
            this._callbacks.onStale();
            this._gracePeriodTimerId = setTimeout(() => {
                var _a;
                (_a = this._logger) === null || _a === void 0 ? void 0 : _a.warn('SSE grace period expired — giving up');
                this._stale = false;
                // Mirror the fatal-error path: close and clear connection state so the
                // backoff retry's connect() call is not short-circuited by the urlsUnchanged
                // check (which gates on _connections.length > 0).
                for (const conn of this._connections) {
                    conn.close();
                }
                this._connections = [];
                this._urls = new Set();
                this._callbacks.onError();
            }, DEFAULT_GRACE_PERIOD_SEC * 1000);
        }
    }
    _handleMessage(event) {
        var _a;
        // Connection recovered — cancel grace period if active
        if (this._stale) {
            this._clearGracePeriod();
            this._stale = false;
        }
        try {
            const data = this._parseEvent(event);
            if (data.type !== 'refetchEvaluation') {
                // Ignore unknown event types for forward compatibility
                return;
            }
            const metadata = {};
            if (data.etag) {
                metadata.flagConfigEtag = data.etag;
            }
            if (data.lastModified !== undefined) {
                metadata.flagConfigLastModified = data.lastModified;
            }
            // Coalesce rapid events via debounce
            this._pendingMetadata = metadata;
            this._clearDebounce();
            this._debounceTimerId = setTimeout(() => {
                const meta = this._pendingMetadata;
                this._pendingMetadata = undefined;
                this._callbacks.onRefetch(meta);
            }, DEBOUNCE_MS);
        }
        catch (_b) {
            (_a = this._logger) === null || _a === void 0 ? void 0 : _a.warn('Failed to parse SSE event data');
        }
    }
    _setupVisibilityHandler() {
        if (typeof document === 'undefined') {
            return;
        }
        this._visibilityHandler = () => {
            if (document.visibilityState === 'hidden') {
                this._startInactivityTimer();
            }
            else {
                this._cancelInactivityTimer();
            }
        };
        document.addEventListener('visibilitychange', this._visibilityHandler);
    }
    _removeVisibilityHandler() {
        if (this._visibilityHandler && typeof document !== 'undefined') {
            document.removeEventListener('visibilitychange', this._visibilityHandler);
            this._visibilityHandler = undefined;
        }
    }
    _startInactivityTimer() {
        this._clearInactivityTimer();
        this._inactivityTimerId = setTimeout(() => {
            var _a;
            (_a = this._logger) === null || _a === void 0 ? void 0 : _a.info('SSE inactivity timeout — closing connections');
            for (const conn of this._connections) {
                conn.close();
            }
            this._connections = [];
        }, this._inactivityDelaySec * 1000);
    }
    _cancelInactivityTimer() {
        var _a;
        if (this._inactivityTimerId !== undefined) {
            clearTimeout(this._inactivityTimerId);
            this._inactivityTimerId = undefined;
            // If connections were closed by the inactivity timeout, reconnect
            if (this._connections.length === 0 && this._urls.size > 0) {
                (_a = this._logger) === null || _a === void 0 ? void 0 : _a.info('SSE resuming — reconnecting and requesting full re-fetch');
                for (const url of this._urls) {
                    this._connectToUrl(url);
                }
                // Unconditional re-fetch (no etag/lastModified)
                this._callbacks.onRefetch(undefined);
            }
        }
    }
    _clearInactivityTimer() {
        if (this._inactivityTimerId !== undefined) {
            clearTimeout(this._inactivityTimerId);
            this._inactivityTimerId = undefined;
        }
    }
    _clearDebounce() {
        if (this._debounceTimerId !== undefined) {
            clearTimeout(this._debounceTimerId);
            this._debounceTimerId = undefined;
        }
    }
    _clearGracePeriod() {
        if (this._gracePeriodTimerId !== undefined) {
            clearTimeout(this._gracePeriodTimerId);
            this._gracePeriodTimerId = undefined;
        }
    }
}

class OFREPWebProvider {
    constructor(options, logger) {
        var _a, _b, _c;
        this.DEFAULT_POLL_INTERVAL = 0;
        this.metadata = {
            name: 'OpenFeature Remote Evaluation Protocol Web Provider',
        };
        this.runsOn = 'client';
        this.domainScoped = true;
        this.events = new OpenFeatureEventEmitter();
        this._flagCache = {};
        this._contextRevision = 0;
        this._isFetching = false;
        this._visibilityChangeHandler = this._onVisibilityChange.bind(this);
        this._sseRetryCount = 0;
        this._options = options;
        this._logger = logger;
        this._etag = null;
        this._ofrepAPI = new OFREPApi(this._options, this._options.fetchImplementation);
        this._pollingInterval = (_a = this._options.pollInterval) !== null && _a !== void 0 ? _a : this.DEFAULT_POLL_INTERVAL;
        this._cacheMode = (_b = this._options.cacheMode) !== null && _b !== void 0 ? _b : 'local-cache-first';
        this._cacheTTL = (_c = this._options.cacheTTL) !== null && _c !== void 0 ? _c : DEFAULT_CACHE_TTL_SECONDS;
        this._isUsingCache = false;
    }
    /**
     * Returns a shallow copy of the flag cache, which is updated at initialization/context-change/configuration-change once the flags are re-evaluated.
     */
    get flagCache() {
        return Object.assign({}, this._flagCache);
    }
    /**
     * Initialize the provider, it will evaluate the flags and start the polling if it is not disabled.
     * @param context - the context to use for the evaluation
     * @param domain - the bound OpenFeature domain, if any
     */
    initialize(context, domain) {
        return __awaiter(this, void 0, void 0, function* () {
            var _a, _b, _c;
            try {
                this._storage = new Storage(this._cacheMode, this._options.baseUrl, () => deriveAuthCredential(this._options), domain !== null && domain !== void 0 ? domain : '', (_a = this._options.cacheKeyGenerator) !== null && _a !== void 0 ? _a : defaultCacheKeyGenerator, this._logger);
                this._context = context;
                let result;
                if (this._cacheMode === 'network-first') {
                    result = yield this._initNetworkFirst(context);
                }
                else {
                    const loadedFromCache = yield this._tryLoadFlagsFromCache(context);
                    if (!loadedFromCache) {
                        result = yield this._fetchFlags(context);
                    }
                }
                if (result) {
                    this._connectSseIfAvailable(result);
                }
                const changeDetection = (_b = this._options.changeDetection) !== null && _b !== void 0 ? _b : 'sse';
                if (!this._sseManager && this._pollingInterval > 0 && changeDetection !== 'none') {
                    this.startPolling();
                }
                if (!this._options.disableVisibilityRefresh && typeof document !== 'undefined') {
                    document.addEventListener('visibilitychange', this._visibilityChangeHandler);
                }
                (_c = this._logger) === null || _c === void 0 ? void 0 : _c.debug(`${this.metadata.name} initialized successfully`);
            }
            catch (error) {
                if (error instanceof OFREPApiUnauthorizedError || error instanceof OFREPForbiddenError) {
                    throw new ProviderFatalError('Initialization failed', { cause: error });
                }
                throw error;
            }
        });
    }
    /* eslint-disable @typescript-eslint/no-unused-vars*/
    /* to make overrides easier we keep these unused vars */
    resolveBooleanEvaluation(flagKey, defaultValue, context) {
        return this._resolve(flagKey, defaultValue);
    }
    resolveStringEvaluation(flagKey, defaultValue, context) {
        return this._resolve(flagKey, defaultValue);
    }
    resolveNumberEvaluation(flagKey, defaultValue, context) {
        return this._resolve(flagKey, defaultValue);
    }
    resolveObjectEvaluation(flagKey, defaultValue, context) {
        return this._resolve(flagKey, defaultValue);
    }
    /**
     * onContextChange is called when the context changes, it will re-evaluate the flags with the new context
     * and update the cache.
     * @param oldContext - the old evaluation context
     * @param newContext - the new evaluation context
     */
    onContextChange(oldContext, newContext) {
        return __awaiter(this, void 0, void 0, function* () {
            var _a, _b, _c, _d, _e, _f, _g;
            this._contextRevision++;
            try {
                if ((oldContext === null || oldContext === void 0 ? void 0 : oldContext.targetingKey) !== (newContext === null || newContext === void 0 ? void 0 : newContext.targetingKey)) {
                    this._etag = null;
                    void ((_a = this._storage) === null || _a === void 0 ? void 0 : _a.clear(oldContext));
                }
                this._context = newContext;
                const now = new Date();
                if (this._retryPollingAfter !== undefined && this._retryPollingAfter > now) {
                    return;
                }
                const loadedFromCache = this._cacheMode === 'local-cache-first' ? yield this._tryLoadFlagsFromCache(newContext) : false;
                if (!loadedFromCache) {
                    // Context change: re-fetch without SSE metadata
                    const result = yield this._fetchFlags(newContext);
                    this._connectSseIfAvailable(result);
                    const changeDetection = (_b = this._options.changeDetection) !== null && _b !== void 0 ? _b : 'sse';
                    if (!this._sseManager && this._pollingInterval > 0 && !this._pollingIntervalId && changeDetection !== 'none') {
                        this.startPolling();
                    }
                }
            }
            catch (error) {
                if (error instanceof OFREPApiTooManyRequestsError) {
                    (_c = this.events) === null || _c === void 0 ? void 0 : _c.emit(ClientProviderEvents.Stale, { message: `${error.name}: ${error.message}` });
                    return;
                }
                if (error instanceof OFREPApiUnauthorizedError || error instanceof OFREPForbiddenError) {
                    (_d = this._logger) === null || _d === void 0 ? void 0 : _d.error(`Auth/config error during context change: ${error.name}: ${error.message}`);
                    (_e = this.events) === null || _e === void 0 ? void 0 : _e.emit(ClientProviderEvents.Error, { message: `${error.name}: ${error.message}` });
                    return;
                }
                if (error instanceof OpenFeatureError ||
                    error instanceof OFREPApiFetchError ||
                    error instanceof OFREPApiUnexpectedResponseError) {
                    (_f = this.events) === null || _f === void 0 ? void 0 : _f.emit(ClientProviderEvents.Error, {
                        message: `${error.name}: ${error.message}`,
                    });
                    return;
                }
                (_g = this.events) === null || _g === void 0 ? void 0 : _g.emit(ClientProviderEvents.Error, { message: `Unknown error: ${error}` });
            }
        });
    }
    /**
     * onClose is called when the provider is closed, it will stop the polling if it is enabled.
     */
    onClose() {
        var _a;
        this.stopPolling();
        this._clearSseRetry();
        if (typeof document !== 'undefined') {
            document.removeEventListener('visibilitychange', this._visibilityChangeHandler);
        }
        (_a = this._sseManager) === null || _a === void 0 ? void 0 : _a.dispose();
        this._sseManager = undefined;
        this._storage = undefined;
        this._ofrepAPI.close();
        return Promise.resolve();
    }
    /**
     * network-first initialization: block on the network request; fall back to the persisted
     * cache only on transient or server errors (5xx, network unavailable, timeout).
     * Auth and configuration errors (401, 403, 400, 404) are never masked by cached values.
     */
    _initNetworkFirst(context) {
        return __awaiter(this, void 0, void 0, function* () {
            var _a, _b, _c;
            try {
                return yield this._fetchFlags(context);
            }
            catch (error) {
                // Auth and configuration errors surface immediately — no cache fallback.
                // 5xx and other transient errors fall through to the persisted cache.
                const status = error instanceof OFREPApiError ? (_a = error.response) === null || _a === void 0 ? void 0 : _a.status : undefined;
                if (error instanceof OFREPApiUnauthorizedError ||
                    error instanceof OFREPForbiddenError ||
                    error instanceof OpenFeatureError ||
                    status === 400 ||
                    status === 404) {
                    throw error;
                }
                // Transient / server errors (5xx, network failures, timeouts) — try the persisted cache as a fallback.
                const cached = yield ((_b = this._storage) === null || _b === void 0 ? void 0 : _b.retrieve(context !== null && context !== void 0 ? context : {}, this._cacheTTL));
                if (!cached) {
                    throw error; // No usable cache — propagate the original error.
                }
                this._isUsingCache = true;
                this._flagCache = cached.flags;
                this._etag = cached.etag;
                if (cached.metadata) {
                    this._flagSetMetadataCache = cached.metadata;
                }
                this._eventStreams = cached.eventStreams;
                // Serving from cache after a transient network failure. Surface the persisted
                // event streams so the caller can establish SSE without waiting for a 200 — a
                // subsequent successful request may be a 304 that carries no eventStreams.
                return ((_c = this._eventStreams) === null || _c === void 0 ? void 0 : _c.length)
                    ? { status: BulkEvaluationStatus.SUCCESS_NO_CHANGES, flags: [], eventStreams: this._eventStreams }
                    : undefined;
            }
        });
    }
    /**
     * _fetchFlags is a function that will call the bulk evaluate flags endpoint to get the flags values.
     * @param context - the context to use for the evaluation
     * @private
     * @returns EvaluationStatus if the evaluation the API returned a 304, 200.
     * @throws TargetingKeyMissingError if the API returned a 400 with the error code TargetingKeyMissing
     * @throws InvalidContextError if the API returned a 400 with the error code InvalidContext
     * @throws ParseError if the API returned a 400 with the error code ParseError
     * @throws GeneralError if the API returned a 400 with an unknown error code
     */
    _fetchFlags(context_1) {
        return __awaiter(this, arguments, void 0, function* (context, generation = this._contextRevision, sseMetadata, unconditional) {
            var _a, _b, _c;
            try {
                const evalReq = {
                    context,
                };
                // ADR-0008 guideline #3: inactivity resume re-fetches must be fully
                // unconditional (no If-None-Match, no flagConfigEtag/flagConfigLastModified).
                const etag = unconditional ? null : this._etag;
                const response = yield this._ofrepAPI.postBulkEvaluateFlags(evalReq, etag, sseMetadata);
                if (response.httpStatus === 304) {
                    // A 304 has no body, so the server does not (re)send eventStreams. Surface the
                    // last-known streams so SSE can still be (re)connected when flags are unchanged.
                    return { status: BulkEvaluationStatus.SUCCESS_NO_CHANGES, flags: [], eventStreams: this._eventStreams };
                }
                if (response.httpStatus !== 200) {
                    throw new GeneralError(`Failed OFREP bulk evaluation request, status: ${response.httpStatus}`);
                }
                const bulkSuccessResp = response.value;
                if (!('flags' in bulkSuccessResp) || !Array.isArray(bulkSuccessResp.flags)) {
                    throw new Error('No flags in OFREP bulk evaluation response');
                }
                const newCache = bulkSuccessResp.flags.reduce((currentCache, currentResponse) => {
                    if (currentResponse.key) {
                        currentCache[currentResponse.key] = currentResponse;
                    }
                    return currentCache;
                }, {});
                if (generation !== this._contextRevision) {
                    return { status: BulkEvaluationStatus.SUCCESS_NO_CHANGES, flags: [] };
                }
                const listUpdatedFlags = this._getListUpdatedFlags(this._flagCache, newCache);
                this._flagCache = newCache;
                this._eventStreams = bulkSuccessResp.eventStreams;
                const newEtag = (_b = (_a = response.httpResponse) === null || _a === void 0 ? void 0 : _a.headers.get('etag')) !== null && _b !== void 0 ? _b : null;
                this._flagSetMetadataCache = toFlagMetadata(typeof bulkSuccessResp.metadata === 'object' ? bulkSuccessResp.metadata : {});
                yield ((_c = this._storage) === null || _c === void 0 ? void 0 : _c.store(context !== null && context !== void 0 ? context : {}, newCache, newEtag, this._flagSetMetadataCache, this._eventStreams));
                this._etag = newEtag;
                this._isUsingCache = false;
                return {
                    status: BulkEvaluationStatus.SUCCESS_WITH_CHANGES,
                    flags: listUpdatedFlags,
                    eventStreams: bulkSuccessResp.eventStreams,
                };
            }
            catch (error) {
                if (error instanceof OFREPApiTooManyRequestsError && error.retryAfterDate !== null) {
                    this._retryPollingAfter = error.retryAfterDate;
                }
                throw error;
            }
        });
    }
    /**
     * _getListUpdatedFlags is a function that will compare the old cache with the new cache and
     * return the list of flags that have been updated / deleted / created.
     * @param oldCache
     * @param newCache
     * @private
     */
    _getListUpdatedFlags(oldCache, newCache) {
        const changedKeys = [];
        const oldKeys = Object.keys(oldCache);
        const newKeys = Object.keys(newCache);
        // Check for added or modified keys in newCache
        for (const key in newCache) {
            if (oldKeys.indexOf(key) === -1 || JSON.stringify(oldCache[key]) !== JSON.stringify(newCache[key])) {
                changedKeys.push(key);
            }
        }
        // Check for removed keys in oldCache
        for (const key in oldCache) {
            if (newKeys.indexOf(key) === -1) {
                changedKeys.push(key);
            }
        }
        return changedKeys;
    }
    /**
     * _resolve is a function retrieving the value from a flag in the cache.
     * @param flagKey - name of the flag to retrieve
     * @param type - type of the flag
     * @param defaultValue - default value
     * @private
     */
    _resolve(flagKey, defaultValue) {
        const resolved = this._flagCache[flagKey];
        if (!resolved) {
            return {
                value: defaultValue,
                flagMetadata: this._flagSetMetadataCache,
                reason: StandardResolutionReasons.ERROR,
                errorCode: ErrorCode.FLAG_NOT_FOUND,
                errorMessage: ErrorMessageMap[ErrorCode.FLAG_NOT_FOUND],
            };
        }
        return this.responseToResolutionDetails(resolved, defaultValue);
    }
    responseToResolutionDetails(response, defaultValue) {
        if (isEvaluationFailureResponse(response)) {
            return handleEvaluationError(response, defaultValue);
        }
        const resolution = toResolutionDetails(response, defaultValue);
        if (this._isUsingCache) {
            resolution.reason = StandardResolutionReasons.CACHED;
        }
        return resolution;
    }
    /**
     * Fetches flags and emits the appropriate events based on the result.
     * Uses a concurrency guard to prevent overlapping requests.
     * @param reason - a short description of what triggered the refresh (used in event messages)
     * @private
     */
    _refreshFlags(reason_1) {
        return __awaiter(this, arguments, void 0, function* (reason, emitStaleOnError = true) {
            var _a, _b, _c;
            if (this._isFetching) {
                return;
            }
            const now = new Date();
            if (this._retryPollingAfter !== undefined && this._retryPollingAfter > now) {
                return;
            }
            this._isFetching = true;
            try {
                const res = yield this._fetchFlags(this._context);
                if (res.status === BulkEvaluationStatus.SUCCESS_WITH_CHANGES) {
                    (_a = this.events) === null || _a === void 0 ? void 0 : _a.emit(ClientProviderEvents.ConfigurationChanged, {
                        message: `Flags updated (${reason})`,
                        flagsChanged: res.flags,
                    });
                }
            }
            catch (error) {
                if (emitStaleOnError) {
                    (_b = this.events) === null || _b === void 0 ? void 0 : _b.emit(ClientProviderEvents.Stale, {
                        message: `Error while refreshing flags (${reason}): ${error}`,
                    });
                }
                else {
                    (_c = this._logger) === null || _c === void 0 ? void 0 : _c.warn(`Error while refreshing flags (${reason}): ${error}`);
                }
            }
            finally {
                this._isFetching = false;
            }
        });
    }
    /**
     * Connect to SSE event streams if present in the response.
     * If SSE connects, stop polling; if no SSE, does not start polling
     * (that is handled by the caller).
     */
    _connectSseIfAvailable(result) {
        var _a, _b;
        const changeDetection = (_a = this._options.changeDetection) !== null && _a !== void 0 ? _a : 'sse';
        if (result.eventStreams && result.eventStreams.length > 0 && changeDetection === 'sse') {
            if (!this._sseManager && typeof EventSource === 'undefined') {
                (_b = this._logger) === null || _b === void 0 ? void 0 : _b.debug('EventSource is unavailable; skipping SSE connection');
                return;
            }
            this.stopPolling();
            this._clearSseRetry();
            if (!this._sseManager) {
                this._sseManager = new SseManager({
                    onRefetch: (metadata) => this._handleSseRefetch(metadata),
                    onStale: () => this._handleSseStale(),
                    onError: () => this._handleSseError(),
                }, this._options.inactivityDelaySec, this._logger, this._options.baseUrl, 
                // Leave EventSource implementation as the default; only tests inject a mock
                undefined, this._options.sseEventParser);
            }
            this._sseManager.connect(result.eventStreams);
            this._sseRetryCount = 0;
        }
        else if (this._sseManager) {
            this._sseManager.dispose();
            this._sseManager = undefined;
        }
    }
    /**
     * Handle an SSE refetchEvaluation event.
     */
    _handleSseRefetch(metadata) {
        return __awaiter(this, void 0, void 0, function* () {
            var _a, _b;
            try {
                const isInactivityResume = metadata === undefined;
                const res = yield this._fetchFlags(this._context, undefined, metadata, isInactivityResume);
                if (res.status === BulkEvaluationStatus.SUCCESS_WITH_CHANGES) {
                    (_a = this.events) === null || _a === void 0 ? void 0 : _a.emit(ClientProviderEvents.ConfigurationChanged, {
                        message: 'Flags updated',
                        flagsChanged: res.flags,
                    });
                }
            }
            catch (error) {
                (_b = this.events) === null || _b === void 0 ? void 0 : _b.emit(ClientProviderEvents.Stale, { message: `Error during SSE re-fetch: ${error}` });
            }
        });
    }
    /**
     * Handle SSE transient errors — emit stale while EventSource auto-reconnects.
     */
    _handleSseStale() {
        var _a;
        (_a = this.events) === null || _a === void 0 ? void 0 : _a.emit(ClientProviderEvents.Stale, {
            message: 'SSE connection interrupted — attempting to reconnect',
        });
    }
    /**
     * Handle SSE connection errors.
     * Falls back to polling when enabled; otherwise retries SSE with exponential backoff.
     */
    _handleSseError() {
        var _a, _b, _c;
        if (!this._sseManager) {
            return;
        }
        // Fall back to polling if it's enabled and not already running
        if (this._pollingInterval > 0 && !this._pollingIntervalId) {
            (_a = this._logger) === null || _a === void 0 ? void 0 : _a.info('SSE error — falling back to polling');
            this._sseManager.dispose();
            this._sseManager = undefined;
            this.startPolling();
            return;
        }
        // Polling is disabled — retry SSE with exponential backoff (1 s → 2 s → 4 s … capped at 60 s).
        // Any non-positive pollInterval means polling is disabled, so treat negatives the same as 0.
        const changeDetection = (_b = this._options.changeDetection) !== null && _b !== void 0 ? _b : 'sse';
        if (this._pollingInterval <= 0 && changeDetection !== 'none') {
            const delayMs = Math.min(1000 * Math.pow(2, this._sseRetryCount), 60000);
            this._sseRetryCount++;
            (_c = this._logger) === null || _c === void 0 ? void 0 : _c.info(`SSE error — polling disabled, retrying SSE in ${delayMs}ms (attempt ${this._sseRetryCount})`);
            this._sseRetryTimerId = setTimeout(() => __awaiter(this, void 0, void 0, function* () {
                var _a;
                this._sseRetryTimerId = undefined;
                try {
                    const result = yield this._fetchFlags(this._context);
                    this._connectSseIfAvailable(result);
                }
                catch (error) {
                    (_a = this._logger) === null || _a === void 0 ? void 0 : _a.warn(`SSE retry fetchFlags failed: ${error} — scheduling next attempt`);
                    this._handleSseError();
                }
            }), delayMs);
        }
    }
    _clearSseRetry() {
        if (this._sseRetryTimerId !== undefined) {
            clearTimeout(this._sseRetryTimerId);
            this._sseRetryTimerId = undefined;
        }
    }
    /**
     * Start polling for flag updates, it will call the bulk update function every pollInterval
     * @private
     */
    startPolling() {
        this._pollingIntervalId = setInterval(() => {
            this._refreshFlags('polling');
        }, this._pollingInterval);
    }
    _refreshFlagsInBackground() {
        return __awaiter(this, void 0, void 0, function* () {
            var _a, _b, _c, _d, _e;
            const now = new Date();
            if (this._retryPollingAfter !== undefined && this._retryPollingAfter > now) {
                return;
            }
            try {
                const res = yield this._fetchFlags(this._context);
                if (res.status === BulkEvaluationStatus.SUCCESS_WITH_CHANGES) {
                    // A fresh 200 response may carry eventStreams — establish SSE if available.
                    // Only on SUCCESS_WITH_CHANGES (not 304/stale) to avoid racing with a
                    // concurrent context-change that may have already set up a newer SSE manager.
                    this._connectSseIfAvailable(res);
                    (_a = this.events) === null || _a === void 0 ? void 0 : _a.emit(ClientProviderEvents.ConfigurationChanged, {
                        message: 'Flags updated',
                        flagsChanged: res.flags,
                    });
                }
            }
            catch (error) {
                if (error instanceof OFREPApiTooManyRequestsError) {
                    (_b = this.events) === null || _b === void 0 ? void 0 : _b.emit(ClientProviderEvents.Stale, { message: `${error.name}: ${error.message}` });
                    return;
                }
                if (error instanceof OFREPApiUnauthorizedError || error instanceof OFREPForbiddenError) {
                    (_c = this._logger) === null || _c === void 0 ? void 0 : _c.error(`Auth/config error during background refresh: ${error.name}: ${error.message}`);
                    (_d = this.events) === null || _d === void 0 ? void 0 : _d.emit(ClientProviderEvents.Error, { message: `${error.name}: ${error.message}` });
                    return;
                }
                (_e = this.events) === null || _e === void 0 ? void 0 : _e.emit(ClientProviderEvents.Stale, { message: `Error while polling: ${error}` });
            }
        });
    }
    _tryLoadFlagsFromCache(context) {
        return __awaiter(this, void 0, void 0, function* () {
            var _a, _b;
            const cached = yield ((_a = this._storage) === null || _a === void 0 ? void 0 : _a.retrieve(context !== null && context !== void 0 ? context : {}, this._cacheTTL));
            if (cached) {
                this._isUsingCache = true;
                this._flagCache = cached.flags;
                this._etag = cached.etag;
                if (cached.metadata) {
                    this._flagSetMetadataCache = cached.metadata;
                }
                this._eventStreams = cached.eventStreams;
                // Connect SSE from the persisted streams: the background refresh below sends
                // If-None-Match and will receive a 304 (no body, no eventStreams) when flags are
                // unchanged, so we must rely on the cached configuration to establish SSE here.
                if ((_b = this._eventStreams) === null || _b === void 0 ? void 0 : _b.length) {
                    this._connectSseIfAvailable({
                        status: BulkEvaluationStatus.SUCCESS_NO_CHANGES,
                        flags: [],
                        eventStreams: this._eventStreams,
                    });
                }
                void this._refreshFlagsInBackground();
                return true;
            }
            return false;
        });
    }
    stopPolling() {
        if (this._pollingIntervalId) {
            clearInterval(this._pollingIntervalId);
            this._pollingIntervalId = undefined;
        }
    }
    /**
     * Handler for visibility changes (page/app becoming visible)
     * Re-fetches flags when the document becomes visible
     * @private
     */
    _onVisibilityChange() {
        if ((document === null || document === void 0 ? void 0 : document.visibilityState) === 'visible') {
            // Suppress STALE on failure: a single missed refresh doesn't mean the cache is stale.
            this._refreshFlags('visibility change', false);
        }
    }
}

export { OFREPWebProvider, defaultSseEventParser };
