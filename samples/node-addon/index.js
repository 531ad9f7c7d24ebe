'use strict';
// cuv from Node.js: the addon built by Meson (see addon.c for the API). CUV_NODE_ADDON names the
// built cuv_node.node; without it, the build folder `build` at the top of the repository is used.
const path = require('node:path');

module.exports = require(process.env.CUV_NODE_ADDON ||
  path.join(__dirname, '..', '..', 'build', 'samples', 'node-addon', 'cuv_node.node'));
