/**
 * The Hercules server without SQLite (`@hercules/server/core`): the front door's `createServer`
 * over a store or a deployment given (a `MemoryStore`, your own `RoomStore`, a cluster node's
 * `ClusterStore`), the room service, the room locator, webhooks, the admin API, auth and the
 * pipeline. Importing it never loads `better-sqlite3`: what a cluster node runs on.
 * `@hercules/server` is this plus the SQLite store and a `createServer` that keeps rooms in `dataDir`.
 */
export { createServer } from './front-door.ts';
export type { Deployment, DeploymentContext, FrontDoorOptions, HerculesServer, Limits, Placement } from './front-door.ts';
export { hereLocator } from './room-locator.ts';
export type { BackendCall, EdgeSocket, RelayLink, RemoteRooms, RoomLocation, RoomLocator } from './room-locator.ts';
export { locatedBackend, runBackendCall, type Backend } from './located-backend.ts';
export { LOG_PAGE_MAX, replayFrom, type LogPage } from './history.ts';
export { withEarlyFrames } from './routed-upgrade.ts';
export { staticFiles, type HttpHandler } from './static-files.ts';
export { memoryCursors, newWebhookSecret, standardWebhookSignature, webhookSignature } from './webhooks.ts';
export type { WebhookCursors, WebhookOptions } from './webhooks.ts';
export type { AdminOptions } from './admin-http.ts';
export { createRoomService, resolveLimits, ROOMS_PAGE_DEFAULT, ROOMS_PAGE_MAX } from './room-service.ts';
export { createMetrics, type Metrics } from './metrics.ts';
export { boundConnections, boundedHttpOptions, countPendingCloses } from './upgrade-bound.ts';
export type { UpgradeBound, PendingCloseReason, PendingEvents } from './upgrade-bound.ts';
export { StoreHealth, STALE_MS } from './store-health.ts';
export type { StoreHealthReport } from './store-health.ts';
export type { RoomFile, ServiceOptions, RoomService, RoomServiceOptions, RoomSummary, RoomsPage, RoomsQuery, ServerRoom } from './room-service.ts';
/** @deprecated Renamed `ServiceOptions` (core's `RoomOptions` are a room engine's); this alias goes in the next major. */
export type { ServiceOptions as RoomOptions } from './room-service.ts';
export type { ConnectionRequest, Refusal } from './admission.ts';
export { acceptClock } from './admission.ts';
export { wsConnection } from './ws-connection.ts';
export type { WsSocket } from './ws-connection.ts';
export { AuthError, jwtAuthenticator, tokenFromRequest } from './auth.ts';
export type { Access, AccessHook, Authenticate, Identity, JwtOptions } from './auth.ts';
// The pipeline: RoomHost, RoomRegistry, Clock, Connection, MemoryStore and the RoomStore contract.
export * from './pipeline.ts';
