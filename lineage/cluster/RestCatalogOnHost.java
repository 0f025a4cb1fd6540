// Iceberg's REST catalog server of the local stack (lineage/cluster/stack.py), listening on one address.
//
// org.apache.iceberg.rest.RESTCatalogServer (iceberg-open-api's test fixtures, the server of the
// apache/iceberg-rest-fixture image) makes its Jetty server with `new Server(port)`: a connector on every
// interface, and no setting to change that. This program serves the same backend catalog (configured by the
// same CATALOG_* variables, port included: CATALOG_REST_PORT) with the same servlet, behind a connector bound
// to the system property lineage.rest.host (127.0.0.1 when unset). The fixture's own members are package
// private: they are reached by reflection, so a change of them in another Iceberg release fails at start-up
// with a NoSuchMethodException naming the member, not later.
//
// Run from source (the JDK compiles it in memory at start-up):
//   java -Dlineage.rest.host=127.0.0.1 -cp "<iceberg-rest jars>/*" RestCatalogOnHost.java

import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.util.Map;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServer;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.eclipse.jetty.compression.gzip.GzipCompression;
import org.eclipse.jetty.compression.server.CompressionHandler;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

public final class RestCatalogOnHost {
  private static final String PORT = "rest.port";
  private static final int DEFAULT_PORT = 8181;

  private RestCatalogOnHost() {}

  public static void main(String[] args) throws Exception {
    String host = System.getProperty("lineage.rest.host", "127.0.0.1");

    // The backend catalog exactly as the fixture builds it from the CATALOG_* variables.
    Constructor<RESTCatalogServer> fixtureConstructor = RESTCatalogServer.class.getDeclaredConstructor();
    fixtureConstructor.setAccessible(true);
    RESTCatalogServer fixture = fixtureConstructor.newInstance();
    Method initialize = RESTCatalogServer.class.getDeclaredMethod("initializeBackendCatalog");
    initialize.setAccessible(true);
    Object context = initialize.invoke(fixture);
    Method configuration = context.getClass().getDeclaredMethod("configuration");
    configuration.setAccessible(true);
    @SuppressWarnings("unchecked")
    Map<String, String> config = (Map<String, String>) configuration.invoke(context);
    String port = config.get(PORT);
    int portNumber = port == null ? DEFAULT_PORT : Integer.parseInt(port.trim());

    Class<?> adapterClass = Class.forName("org.apache.iceberg.rest.RESTServerCatalogAdapter");
    Constructor<?> adapterConstructor = adapterClass.getDeclaredConstructor(context.getClass());
    adapterConstructor.setAccessible(true);
    RESTCatalogAdapter adapter = (RESTCatalogAdapter) adapterConstructor.newInstance(context);

    ServletContextHandler handler = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    handler.addServlet(new ServletHolder(new RESTCatalogServlet(adapter)), "/*");
    CompressionHandler compression = new CompressionHandler();
    compression.putCompression(new GzipCompression());
    handler.insertHandler(compression);

    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost(host);
    connector.setPort(portNumber);
    server.addConnector(connector);
    server.setHandler(handler);
    server.start();
    System.out.println("REST catalog listening on " + host + ":" + portNumber);
    server.join();
  }
}
