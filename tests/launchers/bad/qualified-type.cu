// expect: 3: parameter 'p' of kernel step names a qualified type (physics::...)
namespace physics { struct particle { float x, v; }; }
extern "C" __global__ void step(physics::particle p, float *out) {}
