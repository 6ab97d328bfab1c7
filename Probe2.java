import java.net.URI;
import java.net.http.*;
import java.util.concurrent.*;
public class Probe2 {
  public static void main(String[] a) throws Exception {
    HttpClient c = HttpClient.newHttpClient();
    try {
      c.newWebSocketBuilder().header("Authorization", "Bearer " + a[1]).buildAsync(URI.create(a[0]), new WebSocket.Listener(){}).get(10, TimeUnit.SECONDS);
    } catch (Exception e) { System.out.println("EXC " + e); }
  }
}
