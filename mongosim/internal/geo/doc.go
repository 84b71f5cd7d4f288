// Package geo is mongosim's geospatial engine: it parses the geometries
// MongoDB stores (GeoJSON objects and legacy coordinate pairs) and the
// geometries its query operators take ($geoWithin, $geoIntersects, $near,
// $nearSphere and the $geoNear stage), decides containment, intersection
// and distance on the sphere (with S2, github.com/golang/geo) or in the
// flat plane of a 2d index, and keeps the S2 cells of indexed geometries so
// a $near search visits nearby cells instead of every document.
//
// Semantics follow mongod 8.0: points are S2 leaf cells (so a point on a
// polygon's edge is within it), GeoJSON polygons are the smaller of the
// regions their rings bound, distances on the sphere are metres for GeoJSON
// queries and radians for legacy ones, with mongod's Earth radius.
package geo
