export { createServer } from './server.ts';
export { staticFiles, type HttpHandler } from './static-files.ts';
export { newWebhookSecret, standardWebhookSignature, webhookSignature, type WebhookOptions } from './webhooks.ts';
export type { ServerOptions, HerculesServer, Limits } from './server.ts';
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
export { SqliteStore } from './store/sqlite.ts';
export type { SqliteStoreOptions } from './store/sqlite.ts';
// The pipeline: RoomHost, RoomRegistry, Clock, Connection, MemoryStore and the RoomStore contract.
export * from './pipeline.ts';
