// Package difffile will hold the differential-file filter: a counting Bloom
// filter over the keys changed since their last merge into the base level, so
// that reads of unchanged keys go straight to the base.
package difffile
