// Package readpref holds the read preference vocabulary that the client
// and its server selection share: the modes with their names as the server
// and connection strings spell them, the read preference itself with the
// rules that do not depend on the deployment, and the maxStalenessSeconds
// minimum of the Server Selection specification
// (https://github.com/mongodb/specifications/blob/master/source/server-selection/server-selection.md).
// It imports nothing of the module.
package readpref
