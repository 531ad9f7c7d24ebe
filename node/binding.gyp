# node-gyp's build of the addon; scripts/build.js writes gen/build.gypi (the source lists, include
# folders and settings) and runs it. Two products in build/Release:
#   cuv_node.node      the addon: cuv compiled in statically, the libuv adapter compiled against
#                      Node's uv.h (uv_* and napi_* resolve from the node process), the kernels as
#                      PTX strings; no library of cuv's beside it is needed
#   libcuv-sim.so.N    the CPU simulator, loaded only when CUV_DRIVER=sim: cuv looks for it beside
#                      the module that holds cuv, which is cuv_node.node (lib/driver.c)
{
  'includes': ['gen/build.gypi'],
  'target_defaults': {
    'cflags_c': ['-std=gnu11', '-fvisibility=hidden', '-Wshadow', '-Wstrict-prototypes',
                 '-Wmissing-prototypes', '-Wno-unused-parameter'],
    'defines': ['_GNU_SOURCE', 'NAPI_VERSION=8', 'CUV_SIM_SONAME="<(cuv_sim_soname)"'],
    'include_dirs': ['<@(cuv_includes)'],
    'libraries': ['-ldl', '-lm', '-pthread'],
    # cuv's threads (reactor, submitters) and the simulator's run code of these modules until the
    # process ends: neither may be unmapped when node or cuv closes its handle.
    'ldflags': ['-Wl,-z,nodelete'],
    'conditions': [['cuv_werror==1', {'cflags_c': ['-Werror']}]],
  },
  'targets': [
    {
      'target_name': 'cuv_node',
      'sources': ['<@(cuv_lib_sources)', '<@(cuv_addon_sources)'],
    },
    {
      'target_name': 'cuv-sim',
      'product_prefix': 'lib',
      # After node-gyp's own target condition, which names every loadable module *.node.
      'target_conditions': [['_type=="loadable_module"', {
        'product_extension': '<(cuv_sim_extension)',
      }]],
      'sources': ['<@(cuv_sim_sources)'],
      'defines': ['CUV_SIM_BUILDING'],
      'ldflags': ['-Wl,-soname,<(cuv_sim_soname)'],
    },
  ],
}
